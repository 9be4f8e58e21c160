"""A rented machine's prover status over HTTP: a Starlette app, and the one
thing HTTP frameworks do not do, dropping a connection without an answer.

What a request gets depends on the machine at that moment
(`Market.prover_endpoint`, read on a thread pool: it takes the market's lock):

* running: ``GET /status`` answers the prover's JSON status (other paths 404),
  ``POST /drain`` what `Market.drain_prover` says: a hostile host's answer a
  byte a second (``trickle``, for `TRICKLE_S`) or 200 MB (``flood``);
* frozen: the request is read and never answered (a paused container);
* anything else (loading, stopped, rebooting, dead): the connection is closed
  without an answer, as when nothing listens behind the port.

An ASGI app can only answer, so each connection runs inside `_Tracked`, which
files it by the client's address; the app looks it up and closes it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from functools import partial
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .control import DrainAnswer, ProverAnswer
from .prover import PROVER_STATUS_PATH

__all__ = ["FLOOD_BYTES", "TRICKLE_S", "Connections", "create_status_app"]

_HANG_S = 30.0
_JSON = "application/json"
#: A hostile drain answer: a byte a second for this long, or this many bytes
#: as fast as the reader takes them (both stop when the reader hangs up).
TRICKLE_S = 120
FLOOD_BYTES = 200 * 1024 * 1024
_FLOOD_CHUNK = 64 * 1024


class _Tracked(asyncio.Protocol):
    """uvicorn's protocol for one connection, filed under its peer address."""

    def __init__(self, inner: asyncio.Protocol, instance_id: int, filed: Connections) -> None:
        self.inner = inner
        self.instance_id = instance_id
        self.transport: asyncio.BaseTransport | None = None
        self.lost = asyncio.Event()
        self._filed = filed
        self._peer: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self._peer = transport.get_extra_info("peername")
        self._filed.by_peer[self._peer] = self
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._filed.by_peer.pop(self._peer, None)
        self.inner.connection_lost(exc)
        self.lost.set()


class Connections:
    """The live prover connections of one gateway (touched on its loop only)."""

    def __init__(self) -> None:
        self.by_peer: dict[Any, _Tracked] = {}

    def wrapper(self, instance_id: int) -> Callable[[asyncio.Protocol], asyncio.Protocol]:
        """What `ThreadedServer.adopt` takes for a connection to `instance_id`'s port."""
        return partial(_Tracked, instance_id=instance_id, filed=self)


def _json(status: int, body: dict[str, Any]) -> Response:
    response = Response(json.dumps(body).encode(), status_code=status)
    response.headers["content-type"] = _JSON
    return response


def _hostile_drain(
    mode: str, stopping: threading.Event, sent: Callable[[int, float], None] | None
) -> StreamingResponse:
    """A hostile host's 200 to ``POST /drain``: a byte a second (``trickle``)
    or `FLOOD_BYTES` (``flood``); `sent(bytes, seconds)` once it ends, the
    reader hung up or not (Starlette cancels the body when it does)."""

    async def body() -> AsyncIterator[bytes]:
        began, count = time.monotonic(), 0
        try:
            if mode == "trickle":
                for _ in range(TRICKLE_S):
                    if stopping.is_set():
                        return
                    yield b" "
                    count += 1
                    await asyncio.sleep(1.0)
            else:
                chunk = b" " * _FLOOD_CHUNK
                while count < FLOOD_BYTES and not stopping.is_set():
                    yield chunk
                    count += len(chunk)
                    # A write to a connection gone returns at once: yield, so
                    # that Starlette sees the hang-up and ends this body.
                    await asyncio.sleep(0)
        finally:
            if sent is not None:
                sent(count, time.monotonic() - began)

    return StreamingResponse(body(), status_code=200, media_type=_JSON)


def create_status_app(
    answer: Callable[[int], ProverAnswer],
    connections: Connections,
    stopping: threading.Event,
    executor: Executor,
    drain: Callable[[int, str], DrainAnswer] | None = None,
    hostile_sent: Callable[[int, float], None] | None = None,
) -> Starlette:
    """The provers' app: `answer(instance_id)` says what the machine does;
    `drain(instance_id, token)` takes a ``POST /drain`` (the HTTP status to
    answer and how a hostile host sends it, `Market.drain_prover`), the way
    sidecar/fleet_status.py does; `hostile_sent(bytes, seconds)` counts what
    a hostile answer sent before it ended."""

    async def in_pool(call: Callable[[], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(executor, call)

    async def status(request: Request) -> Response:
        conn = connections.by_peer.get(tuple(request.client) if request.client else None)
        if conn is None:  # pragma: no cover - every connection is adopted through a wrapper
            return _json(500, {"error": "unknown connection"})
        kind, body = await in_pool(partial(answer, conn.instance_id))
        if kind == "ok" and body is not None:
            path = request.url.path.rstrip("/")
            if request.method == "POST" and path == "/drain" and drain is not None:
                auth = request.headers.get("authorization", "")
                token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
                code, hostile = await in_pool(partial(drain, conn.instance_id, token))
                if hostile:
                    return _hostile_drain(hostile, stopping, hostile_sent)
                return _json(code, {"draining": code == 200})
            if request.method != "GET" or path != PROVER_STATUS_PATH:
                return _json(404, {"error": "not found"})
            return _json(200, body)
        if kind == "hang":
            await in_pool(partial(stopping.wait, _HANG_S))
        # No answer: close the connection and return once uvicorn has seen it
        # go, so it neither logs a missing response nor sends its own 500.
        if conn.transport is not None:
            conn.transport.close()
        await conn.lost.wait()
        return Response(status_code=204)  # never sent: the connection is gone

    return Starlette(routes=[Route("/{path:path}", status, methods=["GET", "POST"])])
