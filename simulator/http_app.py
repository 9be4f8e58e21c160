"""The simulator's API as a Starlette app: a thin adapter around `SimApi`.

Every request, whatever its path and method, goes to `SimApi.handle` with the
raw request target (path and query as sent, undecoded, as the stdlib server
gave it), the headers and the body; the `Reply` comes back as bytes with the
content type the service uses. Routing, auth, rate limits and error shapes
stay in `simulator.api`, which knows nothing of Starlette.

`SimApi` is synchronous and takes the market's lock, and the "create_delay"
fault sleeps inside it, so it runs on a thread pool rather than on the event
loop: a slow or blocked request never stalls the others.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial
from typing import TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .api import SimApi
from .replies import Reply

__all__ = ["MAX_BODY", "create_app", "to_response"]

_log = logging.getLogger(__name__)

#: Larger request bodies are refused with 413 (no request the API takes is near it).
MAX_BODY = 1 << 20
# The methods the stdlib server answered; others got its 501, and still do.
_METHODS = frozenset({"GET", "POST", "PUT", "DELETE"})
_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"]
_JSON = "application/json"  # exactly this: the vastai CLI compares the header verbatim
_TEXT = "text/plain; charset=utf-8"


def to_response(reply: Reply, *, close: bool = False) -> Response:
    """The HTTP answer for `reply`: JSON `body` as ``json.dumps`` writes it
    (byte-identical to the stdlib server's), else plain `text`."""
    if reply.text is not None or reply.body is None:
        payload, media_type = (reply.text or "").encode(), _TEXT
    else:
        payload, media_type = json.dumps(reply.body).encode(), _JSON
    response = Response(payload, status_code=reply.status)
    # Set verbatim: Starlette would append a charset to a media_type it is given.
    response.headers["content-type"] = media_type
    if close:
        response.headers["connection"] = "close"
    return response


def _target(request: Request) -> str:
    # The request line's target as sent: Starlette's `url.path` is
    # percent-decoded, the API expects what the stdlib handler's `path` was.
    raw_path: bytes = request.scope.get("raw_path") or request.scope["path"].encode()
    query: bytes = request.scope.get("query_string", b"")
    target = raw_path.decode("latin-1")
    return f"{target}?{query.decode('latin-1')}" if query else target


async def _read_body(request: Request) -> bytes | None:
    """The body, or None when it is over `MAX_BODY` (announced or streamed)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


_T = TypeVar("_T")


async def _in_executor(executor: Executor, call: Callable[[], _T]) -> _T:
    # A pool of our own rather than Starlette's default (40 threads): hangs and
    # create delays hold a thread each for seconds, and a fleet fans out more.
    return await asyncio.get_running_loop().run_in_executor(executor, call)


def create_app(api: SimApi, stopping: threading.Event, executor: Executor) -> Starlette:
    """The app serving `api`; `stopping` is set when the server stops, and
    `executor` runs the synchronous API calls and the hang fault's waits."""

    async def endpoint(request: Request) -> Response:
        method = request.method
        if method not in _METHODS:
            return to_response(Reply(501, text=f"Unsupported method ({method!r})"))
        raw = await _read_body(request)
        if raw is None:
            # The rest of the body is not read, so the connection cannot be reused.
            return to_response(Reply(413, text="Request Entity Too Large"), close=True)
        target = _target(request)
        client = request.client.host if request.client is not None else ""
        call = partial(api.handle, method, target, request.headers, raw, client)
        try:
            reply = await _in_executor(executor, call)
        except Exception:
            _log.exception("simulator failed on %s %s", method, target.split("?")[0])
            reply = Reply(500, text="Internal Server Error")
        # The "hang" fault: the work is done, the answer comes late. A thread
        # waits, not the loop, so the stop event can cut it short.
        if reply.delay_s > 0 and await _in_executor(
            executor, partial(stopping.wait, reply.delay_s)
        ):
            return to_response(Reply(503, text="Service Unavailable"), close=True)
        return to_response(reply)

    # Every method reaches `endpoint` (a function route would otherwise take GET only).
    return Starlette(routes=[Route("/{path:path}", endpoint, methods=_ALL_METHODS)])
