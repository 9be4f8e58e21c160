"""Reading a rented machine's prover status over HTTP.

Row → ``ports`` → ``http://<public_ipaddr>:<HostPort>/status``, the way
docs/operations/prover-image.md ("The prover image") tells a prover image to serve it.
Every failure is an answer, never an exception: a machine whose status
cannot be read is "unreachable" (fleet_agent/fleet/provers.py decides what
that means over time). Reads run concurrently, a few at a time, each with a
short timeout: a frozen machine accepts the connection and never answers.

The address is the host's, so it is untrusted: the URL is built from a
parsed `ipaddress` and an int port, never by pasting the row's string (a
``public_ipaddr`` of ``169.254.169.254/latest/meta-data/iam#`` made a URL of
the cloud's metadata service), and an address that is not global (private,
loopback, link-local, multicast, reserved, unspecified, site-local, NAT64,
or a v6 form of one: fleet_agent/addresses.py) is refused before any
connection (`status_url`). Loopback alone may be
allowed (`ProverSpec.allow_loopback`): the simulator's provers listen there.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import logging
import math
import re
import ssl
from collections.abc import Iterable
from ipaddress import IPv4Address, IPv6Address
from typing import Any

import httpx

from fleet_agent.addresses import not_global, v6_form_refusal
from fleet_agent.fleet.prover import LOOPBACK_ENV
from fleet_agent.untrusted import single_line
from fleet_agent.vast.models import Instance

from .provers import ProverRead

__all__ = [
    "LOOPBACK_ENV",
    "PHASES",
    "READ_CONCURRENCY",
    "READ_TIMEOUT_S",
    "address_refusal",
    "parse_status",
    "read_statuses",
    "send_drain",
    "status_url",
]

#: Status reads in flight at once, and how long one may take (a drain too).
READ_CONCURRENCY = 16
READ_TIMEOUT_S = 5.0
_MAX_BODY = 64 * 1024
#: The most of a drain's answer that is read: its status code is the answer
#: (the sidecar sends ``{"draining": true}``); past this it is no answer.
_MAX_DRAIN_BODY = 1024
#: The phases of the contract (docs/operations/prover-image.md, "The prover image"). Any
#: other phase is kept only as one short word: it flows into tracks, notes,
#: events and history (a 5,800-character phase once failed the monitor).
PHASES = frozenset({"fetching_params", "starting", "proving", "error"})
_PHASE_WORD = re.compile(r"[A-Za-z0-9_.-]{1,32}")
_MAX_DETAIL = 200
#: The largest number each kind of field may hold; past it (or below 0, or
#: not finite: Python's JSON parser takes NaN and Infinity) the value is no
#: reading. A host that said it finished 10^300 proofs would otherwise be
#: the whole fleet's capacity, and a 400-digit integer does not even make a
#: float.
_MAX_COUNT = 1e9  # proofs, in flight, queued
_MAX_BYTES = 1e13  # parameter bytes fetched (the parameters are ~50 GB)
_MAX_SECONDS = 1e11  # Unix times and busy seconds (year 5138)

log = logging.getLogger(__name__)


class _Fields:
    """Reads numbers out of one status answer, noting those it drops."""

    def __init__(self) -> None:
        self.dropped: list[str] = []

    def number(self, body: dict[str, Any], key: str, limit: float) -> float | None:
        """A number in [0, `limit`] at `key`; None if absent, else dropped too."""
        value = body.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.dropped.append(key)
            return None
        try:
            number = float(value)
        except OverflowError:  # an integer past any float
            number = math.inf
        if not (0.0 <= number <= limit):  # NaN fails every comparison
            self.dropped.append(key)
            return None
        return number

    def count(self, body: dict[str, Any], key: str) -> int | None:
        value = self.number(body, key, _MAX_COUNT)
        return int(value) if value is not None else None


def parse_status(body: Any, where: str = "a prover") -> ProverRead:
    """A read from a ``GET /status`` JSON answer; a body without the fields
    this code relies on is an unreadable status, said in one line. Every
    field is checked here, at the edge: a number out of its range is dropped
    (logged, naming `where`), the phase is a word of at most 32 characters,
    the detail one line of at most 200 (fleet_agent/untrusted.py)."""
    if not isinstance(body, dict):
        return ProverRead(ok=False, error="status is not a JSON object")
    fields = _Fields()
    phase, completed = body.get("phase"), fields.count(body, "proofs_completed")
    if not isinstance(phase, str) or completed is None:
        return ProverRead(ok=False, error="status lacks phase or proofs_completed")
    if phase not in PHASES and not _PHASE_WORD.fullmatch(phase):
        return ProverRead(ok=False, error="status phase is not a phase")
    params = body.get("params")
    fetched = (
        fields.number(params, "bytes_fetched", _MAX_BYTES) if isinstance(params, dict) else None
    )
    detail = body.get("detail")
    busy = fields.number(body, "busy_seconds", _MAX_SECONDS)
    at_proof = fields.number(body, "last_proof_busy_seconds", _MAX_SECONDS)
    read = ProverRead(
        ok=True,
        phase=phase,
        detail=single_line(detail, _MAX_DETAIL) if isinstance(detail, str) else "",
        proofs_completed=completed,
        last_proof_at=fields.number(body, "last_proof_at", _MAX_SECONDS),
        started_at=fields.number(body, "started_at", _MAX_SECONDS),
        bytes_fetched=int(fetched or 0),
        time=fields.number(body, "time", _MAX_SECONDS),
        proofs_in_flight=fields.count(body, "proofs_in_flight"),
        work_queued=fields.count(body, "work_queued"),
        busy_seconds=busy,
        last_proof_busy_seconds=at_proof if busy else None,
        draining=body.get("draining") is True,
    )
    if fields.dropped:
        log.warning(
            "%s: status fields dropped (not a number in range): %s",
            where,
            ", ".join(fields.dropped),
        )
    return read


def _shown(text: str, limit: int = 40) -> str:
    """`text` for a one-line error: quoted, control characters escaped, cut."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def address_refusal(ip: IPv4Address | IPv6Address, allow_loopback: bool = False) -> str | None:
    """Why a prover status is not read at `ip`, or None: only global
    addresses are, and loopback ones if `allow_loopback`. An IPv6 form that
    hides where it leads (site-local, NAT64, a tunnel to an address that is
    not global) is refused, and so is any address that is not global, by
    the shared rules (fleet_agent/addresses.py)."""
    if isinstance(ip, IPv6Address):
        if ip.scope_id:
            return "a scoped address"
        if ip.ipv4_mapped is not None:
            return address_refusal(ip.ipv4_mapped, allow_loopback)
        form = v6_form_refusal(ip)
        if form is not None:
            return form
    if ip.is_loopback:
        return None if allow_loopback else f"loopback ({LOOPBACK_ENV}=1 allows it)"
    return not_global(ip)


def status_url(inst: Instance, port: int, path: str, allow_loopback: bool = False) -> str:
    """``http://<ip>:<port><path>`` for `inst`'s mapped `port`, built from the
    parsed address and an int port; `ValueError` (one line, why) when the
    port is not mapped or the address is no IP address or is refused
    (`address_refusal`)."""
    where = inst.mapped_port(port)
    if where is None:
        raise ValueError(f"status port {port} is not mapped")
    host, host_port = where
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"public_ipaddr {_shown(host)} is not an IP address") from None
    if not 1 <= host_port <= 65535:
        raise ValueError(f"host port {host_port} is not a port")
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # judged and reached as the v4 address it is
    refusal = address_refusal(ip, allow_loopback)
    if refusal is not None:
        raise ValueError(f"address {ip} refused: {refusal}")
    literal = f"[{ip}]" if isinstance(ip, IPv6Address) else str(ip)
    return f"http://{literal}:{host_port}{path}"


async def _read(
    http: httpx.AsyncClient,
    inst: Instance,
    port: int,
    gate: asyncio.Semaphore,
    allow_loopback: bool,
) -> ProverRead:
    try:
        url = status_url(inst, port, "/status", allow_loopback)
    except ValueError as exc:
        # Unreachable, never a failed poll, and no connection made.
        return ProverRead(ok=False, error=str(exc))
    async with gate:
        answer = await _exchange(http, "GET", url, _MAX_BODY)
    if isinstance(answer, str):
        return ProverRead(ok=False, error=answer)
    status, body = answer
    if status != 200:
        return ProverRead(ok=False, error=f"HTTP {status}")
    if body is None:
        return ProverRead(ok=False, error="status answer too large")
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: 64 KB of "[[[[..."
        return ProverRead(ok=False, error="status is not JSON")
    return parse_status(parsed, f"instance {inst.id}")


async def _exchange(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    limit: int,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes | None] | str:
    """One request to a host under one deadline, `READ_TIMEOUT_S` for the whole
    exchange: a host that trickles a byte at a time restarts httpx's read
    timeout with every chunk, not this one. (HTTP status, body read up to
    `limit`: None past it, the rest never read), or why there was no answer,
    in one line."""
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            return await _fetch(http, method, url, limit, headers)
    except (TimeoutError, httpx.TimeoutException):
        return f"no answer within {READ_TIMEOUT_S:g} s"
    except (httpx.HTTPError, ValueError) as exc:  # ValueError: a header httpx refuses
        return f"connection failed ({type(exc).__name__})"


async def _fetch(
    http: httpx.AsyncClient,
    method: str,
    url: str,
    limit: int,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes | None]:
    """(HTTP status, body) of a request, the body read only up to `limit`:
    None past it, without reading the rest (a host's answer is untrusted)."""
    async with http.stream(method, url, headers=headers) as resp:
        if resp.status_code != 200:
            return resp.status_code, b""
        chunks, size = [], 0
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > limit:
                return resp.status_code, None
            chunks.append(chunk)
        return resp.status_code, b"".join(chunks)


async def read_statuses(
    instances: Iterable[Instance], port: int, *, allow_loopback: bool = False
) -> dict[int, ProverRead]:
    """The prover status of each instance, by id (unreachable ones say why);
    loopback addresses are read only if `allow_loopback` (`status_url`)."""
    todo = list(instances)
    if not todo:
        return {}
    gate = asyncio.Semaphore(READ_CONCURRENCY)
    async with _client() as http:
        reads = await asyncio.gather(*(_read(http, i, port, gate, allow_loopback) for i in todo))
    return {inst.id: read for inst, read in zip(todo, reads, strict=True)}


async def send_drain(
    inst: Instance, port: int, token: str, *, allow_loopback: bool = False
) -> str | None:
    """Ask `inst`'s prover to take no new work (``POST /drain`` on its status
    port, with its drain token: fleet_agent/fleet/drain.py); None once it
    said yes, else why not, in one line. Never raises. The address is
    checked as for a read (`status_url`): the token goes nowhere else. The
    answer is the host's, read as a status is: under one deadline, and at
    most `_MAX_DRAIN_BODY` of it (a 200 MB answer, or one trickled a byte a
    second, is a failure at once, and the caller destroys the machine)."""
    try:
        url = status_url(inst, port, "/drain", allow_loopback)
    except ValueError as exc:
        return str(exc)
    async with _client() as http:
        answer = await _exchange(
            http, "POST", url, _MAX_DRAIN_BODY, {"Authorization": f"Bearer {token}"}
        )
    if isinstance(answer, str):
        return answer
    status, body = answer
    if status != 200:
        return f"HTTP {status}"
    if body is None:
        return "drain answer too large"
    return None


def _client() -> httpx.AsyncClient:
    """A client for hosts: no proxy from the environment (these are direct
    connections to hosts), no redirects (a host's 302 to 169.254.169.254 is
    an answer, not a hop), httpx's own timeouts under `_exchange`'s deadline."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(READ_TIMEOUT_S),
        trust_env=False,
        verify=_tls_context(),
        follow_redirects=False,
    )


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The TLS settings a client gets by default (`trust_env=False`), built
    once per process: a client builds them afresh otherwise, loading the CA
    bundle: 4-5 % of the worker's busy samples at 100 agents (a client per
    poll; docs/decisions/load-time.md, "Many fleets on one worker"). The status URLs
    are plain HTTP; the context is there for the client, not used."""
    return httpx.create_ssl_context(trust_env=False)
