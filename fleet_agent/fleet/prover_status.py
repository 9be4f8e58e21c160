"""Reading a rented machine's prover status over HTTP.

Row → ``ports`` → ``http://<public_ipaddr>:<HostPort>/status``, the way
docs/OPERATIONS.md ("The prover image") tells a prover image to serve it.
Every failure is an answer, never an exception: a machine whose status
cannot be read is "unreachable" (fleet_agent/fleet/provers.py decides what
that means over time). Reads run concurrently, a few at a time, each with a
short timeout: a frozen machine accepts the connection and never answers.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import ssl
from collections.abc import Iterable
from typing import Any

import httpx

from fleet_agent.vast.models import Instance

from .provers import ProverRead

__all__ = ["READ_CONCURRENCY", "READ_TIMEOUT_S", "parse_status", "read_statuses", "send_drain"]

#: Status reads in flight at once, and how long one may take.
READ_CONCURRENCY = 16
READ_TIMEOUT_S = 5.0
_MAX_BODY = 64 * 1024
#: A phase is one word of the contract (fetching_params, starting, proving,
#: error); a longer one is not a status (it would flow into events and history).
_MAX_PHASE = 32


def _number(body: dict[str, Any], key: str) -> float | None:
    """A finite number at `key`, else None (a host's status is untrusted)."""
    value = body.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _count(body: dict[str, Any], key: str) -> int | None:
    """A count at `key` (a finite number >= 0), else None."""
    value = _number(body, key)
    return int(value) if value is not None and value >= 0 else None


def parse_status(body: Any) -> ProverRead:
    """A read from a ``GET /status`` JSON answer; a body without the fields
    this code relies on is an unreadable status, said in one line."""
    if not isinstance(body, dict):
        return ProverRead(ok=False, error="status is not a JSON object")
    phase, completed = body.get("phase"), _number(body, "proofs_completed")
    if not isinstance(phase, str) or completed is None or completed < 0:
        return ProverRead(ok=False, error="status lacks phase or proofs_completed")
    params = body.get("params") if isinstance(body.get("params"), dict) else {}
    fetched = _number(params, "bytes_fetched") if isinstance(params, dict) else None
    detail = body.get("detail")
    if len(phase) > _MAX_PHASE:
        return ProverRead(ok=False, error="status phase is not a phase")
    busy = _number(body, "busy_seconds")
    return ProverRead(
        ok=True,
        phase=phase,
        detail=detail[:200] if isinstance(detail, str) else "",
        proofs_completed=int(completed),
        last_proof_at=_number(body, "last_proof_at"),
        started_at=_number(body, "started_at"),
        bytes_fetched=int(fetched or 0),
        time=_number(body, "time"),
        proofs_in_flight=_count(body, "proofs_in_flight"),
        work_queued=_count(body, "work_queued"),
        busy_seconds=busy if busy is not None and busy >= 0 else None,
        last_proof_busy_seconds=_number(body, "last_proof_busy_seconds") if busy else None,
        draining=body.get("draining") is True,
    )


async def _read(
    http: httpx.AsyncClient, inst: Instance, port: int, gate: asyncio.Semaphore
) -> ProverRead:
    where = inst.mapped_port(port)
    if where is None:
        return ProverRead(ok=False, error=f"status port {port} is not mapped")
    host, host_port = where
    async with gate:
        try:
            # One deadline for the whole answer: a host that trickles a byte
            # at a time restarts httpx's read timeout with every chunk.
            async with asyncio.timeout(READ_TIMEOUT_S):
                status, body = await _fetch(http, f"http://{host}:{host_port}/status")
        except (TimeoutError, httpx.TimeoutException):
            return ProverRead(ok=False, error=f"no answer within {READ_TIMEOUT_S:g} s")
        except httpx.HTTPError as exc:
            return ProverRead(ok=False, error=f"connection failed ({type(exc).__name__})")
        except (httpx.InvalidURL, ValueError) as exc:
            # The host's address makes no URL (rows are stripped when parsed;
            # this is the guard behind it): unreachable, never a failed poll.
            return ProverRead(ok=False, error=f"no URL for {host!r} ({type(exc).__name__})")
    if status != 200:
        return ProverRead(ok=False, error=f"HTTP {status}")
    if body is None:
        return ProverRead(ok=False, error="status answer too large")
    try:
        return parse_status(json.loads(body))
    except ValueError:
        return ProverRead(ok=False, error="status is not JSON")


async def _fetch(http: httpx.AsyncClient, url: str) -> tuple[int, bytes | None]:
    """(HTTP status, body) of a GET, the body read only up to `_MAX_BODY`:
    None past it, without reading the rest (a host's answer is untrusted)."""
    async with http.stream("GET", url) as resp:
        if resp.status_code != 200:
            return resp.status_code, b""
        chunks, size = [], 0
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > _MAX_BODY:
                return resp.status_code, None
            chunks.append(chunk)
        return resp.status_code, b"".join(chunks)


async def read_statuses(instances: Iterable[Instance], port: int) -> dict[int, ProverRead]:
    """The prover status of each instance, by id (unreachable ones say why)."""
    todo = list(instances)
    if not todo:
        return {}
    gate = asyncio.Semaphore(READ_CONCURRENCY)
    timeout = httpx.Timeout(READ_TIMEOUT_S)
    # No proxy from the environment: these are direct connections to hosts.
    async with httpx.AsyncClient(timeout=timeout, trust_env=False, verify=_tls_context()) as http:
        reads = await asyncio.gather(*(_read(http, i, port, gate) for i in todo))
    return {inst.id: read for inst, read in zip(todo, reads, strict=True)}


async def send_drain(inst: Instance, port: int, token: str) -> str | None:
    """Ask `inst`'s prover to take no new work (``POST /drain`` on its status
    port, with its drain token: fleet_agent/fleet/drain.py); None once it
    said yes, else why not, in one line. Never raises."""
    where = inst.mapped_port(port)
    if where is None:
        return f"status port {port} is not mapped"
    host, host_port = where
    try:
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(READ_TIMEOUT_S), trust_env=False, verify=_tls_context()
        ) as http:
            resp = await http.post(
                f"http://{host}:{host_port}/drain", headers={"Authorization": f"Bearer {token}"}
            )
    except httpx.TimeoutException:
        return f"no answer within {READ_TIMEOUT_S:g} s"
    except (httpx.HTTPError, ValueError) as exc:
        return f"connection failed ({type(exc).__name__})"
    if resp.status_code != 200:
        return f"HTTP {resp.status_code}"
    return None


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The TLS settings a client gets by default (`trust_env=False`), built
    once per process: a client builds them afresh otherwise, loading the CA
    bundle: 4-5 % of the worker's busy samples at 100 agents (a client per
    poll; docs/DECISIONS.md, "Many fleets on one worker"). The status URLs
    are plain HTTP; the context is there for the client, not used."""
    return httpx.create_ssl_context(trust_env=False)
