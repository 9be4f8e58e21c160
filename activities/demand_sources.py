"""The demand sources' clients: Curio's web GUI, a generic JSON endpoint, and
the router's queue in the store.

Each `read()` returns a `DemandReadResult`: a reading, or one line saying
why there is none; it never raises for what the source answers or fails
to. The limits are the prover status reads' (fleet_agent/fleet/prover_status.py):
a deadline of `READ_TIMEOUT_S` for the whole answer (a source that
trickles a byte at a time does not hold the activity), JSON answers read
up to 64 KB and no further, no redirects (a 302 to 169.254.169.254 is an
answer, not a hop), no proxy from the environment.

The router (`RouterSource`, ``FLEET_DEMAND_SOURCE=router``, issue 52) is
read from the store, per agent: the jobs waiting at it for a machine and
those in flight (`RouterQueue`, written by router/store_sync.py).

Curio's ``/debug/metrics`` is a whole node's metrics, often past 64 KB:
it is read line by line, keeping only the lines of the two metrics needed
(fleet_agent/demand/sources.py), up to `_MAX_METRICS` bytes in all.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import ValidationError

from fleet_agent.cuzk.witness import RouterQueue
from fleet_agent.demand.reading import DemandReading, DemandReadResult, parse_reading
from fleet_agent.demand.sources import (
    CURIO_ARRIVALS,
    CURIO_METRICS_PATH,
    CURIO_QUEUE_COUNT,
    CURIO_RPC_PATH,
    curio_reading,
    curio_request,
)
from fleet_agent.fleet.prover_status import READ_TIMEOUT_S
from fleet_agent.fleet.witness_reads import WITNESS_STALE_S, router_pending
from fleet_agent.store import RouterWitness, Store

__all__ = [
    "MAX_ANSWER",
    "AnswerTooLarge",
    "CurioSource",
    "HttpJsonSource",
    "NoSource",
    "ReadFailed",
    "RouterSource",
    "http_client",
    "read_body",
    "read_json",
    "read_metric_lines",
    "router_reading",
]

MAX_ANSWER = 64 * 1024
_MAX_METRICS = 16 * 1024 * 1024
_MAX_LINE = 4096
_MAX_SERIES = 1000


class AnswerTooLarge(Exception):
    """An answer past its limit (`MAX_ANSWER`)."""


class ReadFailed(Exception):
    """The one line a read failed with."""


def http_client() -> httpx.AsyncClient:
    """A client with the limits of every source read (module doc)."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(READ_TIMEOUT_S), trust_env=False, follow_redirects=False
    )


async def read_body(resp: httpx.Response, limit: int = MAX_ANSWER) -> bytes:
    """The answer's body, `AnswerTooLarge` past `limit` bytes."""
    chunks, size = [], 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise AnswerTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


def read_json(body: bytes) -> Any:
    """The JSON in `body`; `ReadFailed` when there is none."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: 64 KB of "[[[[..."
        raise ReadFailed("the answer is not JSON") from None


async def _guarded(source: str, read: Callable[[], Any]) -> DemandReadResult:
    """`read()` under the deadline, every failure one line."""
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            outcome = await read()
    except (TimeoutError, httpx.TimeoutException):
        outcome = f"no answer within {READ_TIMEOUT_S:g} s"
    except AnswerTooLarge:
        outcome = f"the answer is larger than {MAX_ANSWER // 1024} KB"
    except ReadFailed as exc:
        outcome = str(exc)
    except (httpx.HTTPError, ValueError) as exc:
        outcome = f"connection failed ({type(exc).__name__})"
    if isinstance(outcome, str):
        return DemandReadResult(source=source, refusal=outcome)
    return DemandReadResult(source=source, reading=outcome)


class NoSource:
    """`FLEET_DEMAND_SOURCE=none`: every read says so."""

    name = "none"

    async def read(self) -> DemandReadResult:
        return DemandReadResult(source=self.name, refusal="no demand source (FLEET_DEMAND_SOURCE)")


class HttpJsonSource:
    """``GET`` a URL that answers the generic shape (docs/operations/demand-mode.md,
    "Demand sources"), with an optional bearer token."""

    name = "http"

    def __init__(self, url: str, token: str | None = None) -> None:
        self._url = url
        self._headers = {"Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    async def read(self) -> DemandReadResult:
        return await _guarded(self.name, self._read)

    async def _read(self) -> Any:
        async with (
            http_client() as http,
            http.stream("GET", self._url, headers=self._headers) as resp,
        ):
            if resp.status_code != 200:
                raise ReadFailed(f"HTTP {resp.status_code}")
            body = await read_body(resp)
        return parse_reading(read_json(body), self.name)


class CurioSource:
    """A Curio node: ``CurioWeb.PSListQueue`` on its web GUI at `origin`
    (e.g. ``http://10.0.0.5:4701``) and two lines of ``/debug/metrics`` on
    its RPC server at `metrics_origin` (e.g. ``http://10.0.0.5:12300``)."""

    name = "curio"

    def __init__(
        self, origin: str, metrics_origin: str, clock: Callable[[], datetime] | None = None
    ) -> None:
        self._origin = origin.rstrip("/")
        self._metrics_origin = metrics_origin.rstrip("/")
        self._clock = clock or (lambda: datetime.now(UTC))

    async def read(self) -> DemandReadResult:
        return await _guarded(self.name, self._read)

    async def _read(self) -> Any:
        async with http_client() as http:
            answer = await self._queue(http)
            lines = await self._metrics(http)
        return curio_reading(answer, lines, self._clock())

    async def _queue(self, http: httpx.AsyncClient) -> Any:
        async with http.stream("POST", self._origin + CURIO_RPC_PATH, json=curio_request()) as resp:
            if resp.status_code != 200:
                raise ReadFailed(f"PSListQueue: HTTP {resp.status_code}")
            return read_json(await read_body(resp))

    async def _metrics(self, http: httpx.AsyncClient) -> list[str]:
        """The lines of the two metrics, read as a stream, the rest dropped."""
        return await read_metric_lines(
            http, self._metrics_origin + CURIO_METRICS_PATH, (CURIO_ARRIVALS, CURIO_QUEUE_COUNT)
        )


async def read_metric_lines(
    http: httpx.AsyncClient, url: str, wanted: tuple[str, ...]
) -> list[str]:
    """The lines of ``GET url`` (Prometheus text) that start with one of
    `wanted`, read as a stream, the rest dropped: up to `_MAX_METRICS` bytes,
    lines up to `_MAX_LINE` (the tail of a longer one is not a line of its
    own), at most `_MAX_SERIES` kept. `ReadFailed` past a limit."""
    kept: list[str] = []
    async with http.stream("GET", url) as resp:
        if resp.status_code != 200:
            raise ReadFailed(f"metrics: HTTP {resp.status_code}")
        size, pending, skipping = 0, b"", False
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > _MAX_METRICS:
                raise ReadFailed(f"metrics larger than {_MAX_METRICS // 2**20} MB")
            *lines, pending = (pending + chunk).split(b"\n")
            if skipping and lines:
                lines, skipping = lines[1:], False  # the end of an endless line
            if len(pending) > _MAX_LINE:
                pending, skipping = b"", True  # an endless line: none of ours
            kept += [
                t
                for line in lines
                if len(line) <= _MAX_LINE
                and (t := line.decode("utf-8", "replace")).startswith(wanted)
            ]
            if len(kept) > _MAX_SERIES:
                raise ReadFailed("metrics: too many series of the metrics read")
        if not skipping and pending.decode("utf-8", "replace").startswith(wanted):
            kept.append(pending.decode("utf-8", "replace"))
    return kept


def router_reading(queue: RouterQueue) -> DemandReading:
    """The demand the router's queue shows: waiting = jobs no machine has
    yet, in flight = jobs at a machine; arrived = every job it took
    (completed, failed, waiting, in flight), done = completed. A job Curio
    gave up on leaves without an answer: arrived then drops, which the
    demand step reads as a restart. `ValidationError` past the bounds."""
    queued = router_pending(queue)
    return DemandReading(
        as_of=queue.at,
        queued=queued,
        in_flight=queue.in_flight,
        arrived_total=queue.completed + queue.failed + queued + queue.in_flight,
        done_total=queue.completed,
        source="router",
    )


class RouterSource:
    """``FLEET_DEMAND_SOURCE=router``: the agent's router queue, from the store
    (`fa_router_queue`). A queue the router has not written for
    `WITNESS_STALE_S` is no reading: the router is not running."""

    name = "router"

    def __init__(
        self, store: Store | None = None, clock: Callable[[], datetime] | None = None
    ) -> None:
        self._witness = RouterWitness(store) if store is not None else None
        self._clock = clock or (lambda: datetime.now(UTC))

    def with_store(self, store: Store) -> RouterSource:
        """This source on `store` (the worker's)."""
        return RouterSource(store, self._clock)

    async def read(self) -> DemandReadResult:
        return DemandReadResult(source=self.name, refusal="the router's queue is per agent")

    async def read_for(self, agent_id: str) -> DemandReadResult:
        """The reading of `agent_id`'s router queue, or why there is none."""
        if self._witness is None:
            return DemandReadResult(source=self.name, refusal="no store to read the router from")
        _, queue, written = await asyncio.to_thread(self._witness.load, agent_id)
        if queue is None or written is None:
            return DemandReadResult(source=self.name, refusal="the router has written no queue")
        ago = (self._clock() - written).total_seconds()
        if ago > WITNESS_STALE_S:
            return DemandReadResult(
                source=self.name, refusal=f"the router's queue is {ago:.0f} s old"
            )
        try:
            reading = router_reading(queue)
        except ValidationError:
            return DemandReadResult(source=self.name, refusal="the router's queue is out of range")
        return DemandReadResult(source=self.name, reading=reading)
