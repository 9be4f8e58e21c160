"""A local HTTP server that speaks the Anthropic Messages API, for tests and benchmarks.

Point the real `anthropic` client at it (``ANTHROPIC_BASE_URL=fake.base_url``)::

    with FakeAnthropic(lambda req: Reply(tool_calls=[("list_instances", {})])) as fake:
        ...  # run code that calls the API
        assert fake.requests[0].tool_names() == ["list_instances"]

Standard library only: a `ThreadingHTTPServer` on 127.0.0.1 in a daemon thread;
the payloads it takes and gives are in anthropic_payloads.py. It validates
requests the way the real API does where it matters for catching malformed
prompts (anthropic_validation.py), keeps a prompt cache and reports its writes
and reads in the usage like the real API (anthropic_cache.py), answers
``"stream": true`` with server-sent events like the real API
(anthropic_sse.py), can inject errors (`fail_next`, before or inside a stream),
add latency, slow a stream down or stall it, end a reply with any stop reason
(``max_tokens`` cutting a tool call's JSON), and records every request and the
highest concurrency seen.

It thinks like the real models (anthropic_models.py says which model does
what): a reply to a thinking request carries thinking blocks with signatures
and bills thinking tokens (anthropic_thinking.py), and the server remembers
what it issued, so thinking passed back altered, dropped, reordered, to
another account or after a changed conversation gets the real API's 400
(anthropic_signatures.py).
"""

from __future__ import annotations

import contextlib
import copy
import json
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from .anthropic_cache import PromptCache, prompt_tokens
from .anthropic_http import Handler, Server, client_gone
from .anthropic_payloads import (
    DEFAULT_TEXT,
    FAKE_API_KEY,
    MID_STREAM_TEXT,
    ErrorReply,
    Reply,
    Request,
    Responder,
    default_responder,
    error_body,
    message_body,
)
from .anthropic_signatures import ThinkingRegistry, without_blocks
from .anthropic_sse import Event, encode_event, message_events
from .anthropic_validation import validate_messages_request

__all__ = [
    "DEFAULT_TEXT",
    "FAKE_API_KEY",
    "MID_STREAM_TEXT",
    "ErrorReply",
    "FakeAnthropic",
    "Reply",
    "Request",
    "Responder",
    "default_responder",
    "validate_messages_request",
]


class _InFlight:
    """One request counted in `FakeAnthropic.in_flight` until `release()` (idempotent)."""

    def __init__(self, fake: FakeAnthropic) -> None:
        self._fake = fake
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            with self._fake._lock:
                self._fake.in_flight -= 1


class FakeAnthropic:
    """The fake API server. Thread-safe; usable as a context manager.

    Every POST /v1/messages is appended to `requests` (even ones answered with an
    error). Outcome order: queued `fail_next` errors, then auth (an ``x-api-key``
    or ``authorization`` header is required), then JSON/shape validation and the
    model's settings (400), then the thinking passed back (400), then the
    responder. A responder that raises gets a 500 `api_error` and the exception
    is kept in `responder_errors`.

    `cache` is the prompt cache (anthropic_cache.py); its TTLs run on `clock`
    (seconds; `time.monotonic` by default: a benchmark on the time-skipping
    server passes the server's clock). `min_cacheable` overrides the minimum
    cacheable prompt length per model.

    `thinking_registry` remembers the thinking blocks and replies issued
    (anthropic_signatures.py), and checks what comes back after validation;
    `redacted_every` N gives every Nth thinking reply a redacted_thinking
    block (0: never; `Reply.redacted` overrides). `clear()` leaves the
    registry alone: what was issued stays valid, as with the real API.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        latency: float = 0.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        min_cacheable: Mapping[str, int] | None = None,
        redacted_every: int = 3,
    ) -> None:
        self._responder: Responder = responder or default_responder
        self.thinking_registry = ThinkingRegistry(redacted_every=redacted_every)
        self.latency = latency
        self.cache = PromptCache(clock=clock)
        if min_cacheable is not None:
            self.cache.min_cacheable = {**self.cache.min_cacheable, **min_cacheable}
        self.requests: list[Request] = []
        self.count_tokens_requests: list[Request] = []
        # Set: count_tokens answers this error (token_count.py's fallback).
        self.count_tokens_error: ErrorReply | None = None
        self.responder_errors: list[BaseException] = []
        self.max_concurrent = 0
        self.in_flight = 0
        self.base_url = ""
        self._lock = threading.Lock()
        self._failures: deque[ErrorReply] = deque()
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0

    # ------------------------------------------------------------ lifecycle

    def start(self) -> FakeAnthropic:
        """Listen on 127.0.0.1 (a free port; after a stop(), the same port again)."""
        if self._server is not None:
            raise RuntimeError("FakeAnthropic is already running")
        self._stopping.clear()
        server = Server(("127.0.0.1", self._port), Handler)
        server.fake = self
        self._port = server.server_address[1]
        self.base_url = f"http://127.0.0.1:{self._port}"
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-anthropic-{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop open connections: later calls get 'connection refused'."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
            self._connections.clear()
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    def env(self, api_key: str = FAKE_API_KEY) -> dict[str, str]:
        """Environment variables that point the SDK (and a subprocess) at this fake."""
        return {"ANTHROPIC_BASE_URL": self.base_url, "ANTHROPIC_API_KEY": api_key}

    # ------------------------------------------------------------ control

    def set_responder(self, responder: Responder | None) -> None:
        """Replace the responder (None → the default 'Nothing to do' verdict reply)."""
        with self._lock:
            self._responder = responder or default_responder

    def fail_next(
        self,
        status: int,
        *,
        times: int = 1,
        error_type: str | None = None,
        message: str | None = None,
        headers: dict[str, str] | None = None,
        error_code: str | None = None,
        after_events: int | None = None,
    ) -> None:
        """Answer the next `times` /v1/messages requests with this error; with
        `after_events`, inside the stream of a streaming request (see `ErrorReply`)."""
        reply = ErrorReply(
            status=status,
            error_type=error_type,
            message=message,
            headers=dict(headers or {}),
            error_code=error_code,
            after_events=after_events,
        )
        with self._lock:
            self._failures.extend([reply] * times)

    def clear(self) -> None:
        """Forget recorded requests, queued failures, the prompt cache and the
        concurrency high-water mark."""
        with self._lock:
            self.requests.clear()
            self.count_tokens_requests.clear()
            self.cache.clear()
            self.responder_errors.clear()
            self._failures.clear()
            self.max_concurrent = self.in_flight

    @property
    def pending_failures(self) -> int:
        with self._lock:
            return len(self._failures)

    # ------------------------------------------------------------ serving

    def _track(self, conn: socket.socket, *, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _serve_messages(self, handler: Handler, raw: bytes) -> None:
        headers = handler.lower_headers()
        body: Any = None
        parse_error = ""
        try:
            body = json.loads(raw) if raw else None
        except ValueError as exc:
            parse_error = f"Request body is not valid JSON: {exc}"
        request = Request(body=body if isinstance(body, dict) else {}, headers=headers)
        dropped: list[tuple[int, int]] = []
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_concurrent = max(self.max_concurrent, self.in_flight)
            failure = self._failures.popleft() if self._failures else None
            responder = self._responder
        # Counted out just before the last byte of the reply is written: once a
        # client has its reply, `in_flight` no longer includes that request.
        slot = _InFlight(self)
        try:
            outcome: Reply | ErrorReply | str
            if failure is not None:
                outcome = failure
            elif not (headers.get("x-api-key") or headers.get("authorization")):
                outcome = ErrorReply(401, "authentication_error", "x-api-key header is required")
            elif parse_error:
                outcome = ErrorReply(400, "invalid_request_error", parse_error)
            elif (problem := validate_messages_request(body)) is not None:
                outcome = ErrorReply(400, "invalid_request_error", problem)
            elif (checked := self.thinking_registry.check(request))[0] is not None:
                outcome = ErrorReply(400, "invalid_request_error", checked[0])
            else:
                dropped = checked[1]
                outcome = self._respond(responder, request)
            if isinstance(outcome, str):
                outcome = Reply(text=outcome)
            if not self._think(handler.connection, self.latency + outcome.delay):
                handler.close_connection = True
                return  # stopped, or the client hung up (timed out), while "thinking"
            if isinstance(outcome, ErrorReply):
                if request.stream and outcome.after_events is not None:
                    interrupted, _ = message_body(request, Reply(text=MID_STREAM_TEXT))
                    events = message_events(interrupted, {}, Reply.chunk_chars)
                    error = ("error", error_body(outcome))
                    self._stream(handler, [*events[: outcome.after_events], error], Reply(), slot)
                else:
                    slot.release()
                    handler._send_error(outcome)
            else:
                cache = self.cache.account(without_blocks(request.body, dropped))
                plan = self.thinking_registry.plan(request, outcome)
                message, tool_json = message_body(request, outcome, cache, plan)
                self.thinking_registry.issue(request, message)
                request.usage = message["usage"]
                request.thinking_tokens = plan.tokens if plan is not None else 0
                request.content = copy.deepcopy(message["content"])
                if request.stream:
                    events = message_events(message, tool_json, max(1, outcome.chunk_chars))
                    self._stream(handler, events, outcome, slot)
                else:
                    slot.release()
                    handler._send(200, message, {})
        finally:
            slot.release()

    def _respond(self, responder: Responder, request: Request) -> Reply | ErrorReply | str:
        try:
            return responder(request)
        except Exception as exc:
            with self._lock:
                self.responder_errors.append(exc)
            return ErrorReply(
                500,
                "api_error",
                "fake responder raised: " + "".join(traceback.format_exception_only(exc)).strip(),
            )

    def _stream(self, handler: Handler, events: list[Event], pace: Reply, slot: _InFlight) -> None:
        """Send `events` as an HTTP 200 event stream, paced and stalled as `pace` says."""
        handler.start_event_stream()
        for i, (name, data) in enumerate(events):
            if pace.stall_after is not None and i >= pace.stall_after:
                self._think(handler.connection, float("inf"))
                handler.close_connection = True
                return  # the client gave up on the silent stream (or the fake stopped)
            if pace.end_after is not None and i >= pace.end_after:
                slot.release()
                break  # a body that ends early but well-formed
            if i and not self._think(handler.connection, pace.chunk_delay):
                handler.close_connection = True
                return
            if i == len(events) - 1:
                slot.release()
            handler.send_chunk(encode_event(name, data))
        handler.send_chunk(b"")  # the terminating chunk: the response is complete

    def _think(self, conn: socket.socket, delay: float) -> bool:
        """Wait `delay` seconds; False if the fake stops or the client hangs up first."""
        deadline = time.monotonic() + delay  # inf: until the client or the fake goes
        while True:
            if self._stopping.is_set() or client_gone(conn):
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            self._stopping.wait(min(0.02, remaining))

    def _serve_count_tokens(self, handler: Handler, raw: bytes) -> None:
        headers = handler.lower_headers()
        try:
            body = json.loads(raw) if raw else None
        except ValueError as exc:
            handler._send_error(ErrorReply(400, message=f"Request body is not valid JSON: {exc}"))
            return
        request = Request(
            body=body if isinstance(body, dict) else {},
            headers=headers,
            path="/v1/messages/count_tokens",
        )
        with self._lock:
            self.count_tokens_requests.append(request)
            error = self.count_tokens_error
        if error is not None:
            handler._send_error(error)
            return
        if not (headers.get("x-api-key") or headers.get("authorization")):
            handler._send_error(
                ErrorReply(401, "authentication_error", "x-api-key header is required")
            )
            return
        check = dict(body) if isinstance(body, dict) else body
        if isinstance(check, dict):
            check.setdefault("max_tokens", 1)  # count_tokens takes no max_tokens
        if (problem := validate_messages_request(check, generation=False)) is not None:
            handler._send_error(ErrorReply(400, "invalid_request_error", problem))
            return
        # The prompt's tokens as the fake counts them for a message's usage.
        counted = prompt_tokens(check) if isinstance(check, dict) else 1
        handler._send(200, {"input_tokens": counted}, {})
