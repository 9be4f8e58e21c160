"""A local HTTP server that speaks the Anthropic Messages API, for tests and benchmarks.

Point the real `anthropic` client at it (``ANTHROPIC_BASE_URL=fake.base_url``)::

    with FakeAnthropic(lambda req: Reply(tool_calls=[("list_instances", {})])) as fake:
        ...  # run code that calls the API
        assert fake.requests[0].tool_names() == ["list_instances"]

Standard library only: a `ThreadingHTTPServer` on 127.0.0.1 in a daemon thread.
It validates requests the way the real API does where it matters for catching
malformed prompts (anthropic_validation.py), keeps a prompt cache and reports
its writes and reads in the usage like the real API (anthropic_cache.py),
answers ``"stream": true`` with
server-sent events like the real API (anthropic_sse.py), can inject errors
(`fail_next`, before or inside a stream), add latency, slow a stream down or
stall it, end a reply with any stop reason (``max_tokens`` cutting a tool call's
JSON), and records every request and the highest concurrency seen.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import select
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from .anthropic_cache import CacheUsage, PromptCache
from .anthropic_sse import Event, cut_json, encode_event, message_events
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

MID_STREAM_TEXT = "This answer is interrupted by a server error before it ends."
"""What a stream carries before an `ErrorReply` with `after_events` interrupts it."""
DEFAULT_TEXT = 'Nothing to do.\n<verdict>{"action": false, "state_changed": false}</verdict>'
FAKE_API_KEY = "fake-anthropic-test-key"
"""Any non-empty key works; this one is what `FakeAnthropic.env()` hands out."""

_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_ERROR_MESSAGES: dict[int, str] = {
    400: "Invalid request.",
    401: "invalid x-api-key",
    402: "Your credit balance is too low to access the Anthropic API.",
    403: "Your API key does not have permission to use the specified resource.",
    404: "The requested resource could not be found.",
    408: "Request timed out.",
    413: "Request exceeds the maximum allowed number of bytes.",
    422: "Unprocessable entity.",
    429: "Number of request tokens has exceeded your per-minute rate limit.",
    500: "Internal server error",
    502: "Bad gateway",
    503: "Service unavailable",
    504: "Gateway timeout",
    529: "Overloaded",
}


# ---------------------------------------------------------------- payloads


def _block_text(block: Any) -> str:
    """The text a content block contributes to the prompt."""
    if isinstance(block, str):
        return block
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            return "\n".join(_block_text(b) for b in content if _block_text(b))
        return str(content) if content is not None else ""
    if kind == "tool_use":
        return f"{block.get('name', '')} {json.dumps(block.get('input', {}), sort_keys=True)}"
    return ""


def _content_text(content: Any, *, with_tool_use: bool = True) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not with_tool_use and isinstance(block, dict) and block.get("type") == "tool_use":
            continue
        text = _block_text(block)
        if text:
            parts.append(text)
    return "\n".join(parts)


@dataclass
class Request:
    """One request the fake received. `headers` keys are lower-case."""

    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    path: str = "/v1/messages"
    received_at: float = field(default_factory=time.time)
    # The usage the fake answered with (None: answered with an error).
    usage: dict[str, Any] | None = None

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def plain_messages(self) -> list[dict[str, Any]]:
        """`messages` without prompt-cache markers, as a conversation reads: a
        content of one marked text block is its text again."""
        plain = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, list):
                marked = any(isinstance(b, dict) and "cache_control" in b for b in content)
                content = [
                    {k: v for k, v in b.items() if k != "cache_control"}
                    if isinstance(b, dict)
                    else b
                    for b in content
                ]
                if marked and len(content) == 1 and content[0].get("type") == "text":
                    content = content[0].get("text", "")
            plain.append({**message, "content": content})
        return plain

    @property
    def tools(self) -> list[dict[str, Any]]:
        tools = self.body.get("tools")
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    @property
    def stream(self) -> bool:
        """True when the client asked for server-sent events."""
        return self.body.get("stream") is True

    @property
    def max_tokens(self) -> int | None:
        value = self.body.get("max_tokens")
        return value if isinstance(value, int) else None

    def last_user_text(self) -> str:
        """Text of the last user message: its text blocks and tool_result contents."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _content_text(message.get("content"), with_tool_use=False)
        return ""

    def system_text(self) -> str:
        return _content_text(self.body.get("system", ""))

    def all_text(self) -> str:
        """System prompt plus every message's text, tool_use (name + JSON input) and
        tool_result content, in order. Tool definitions are not included."""
        parts = [self.system_text()]
        parts.extend(_content_text(m.get("content")) for m in self.messages)
        return "\n".join(p for p in parts if p)

    def tool_names(self) -> list[str]:
        return [str(t.get("name", "")) for t in self.tools]

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks of the last user message."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                content = message.get("content")
                if not isinstance(content, list):
                    return []
                return [
                    b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
                ]
        return []


@dataclass
class Reply:
    """A successful assistant message.

    `usage` None → estimated: the prompt is the request JSON length / 4, of
    which the fake's prompt cache says how much was read and written (when
    the request has breakpoints), the output is its text length / 4. A given
    `usage` (input, output) is reported as is, with `cache_read_input_tokens`
    and `cache_creation_input_tokens` from here. Cache token fields appear in
    the response when the request has breakpoints or they are non-zero.
    `delay` adds seconds of latency to this reply only (before anything is sent).

    `stop_reason` None → ``tool_use`` with tool calls, else ``end_turn``; any
    other string is sent as is (``refusal``, ``pause_turn``, a future value).
    ``max_tokens`` with tool calls cuts the last call's input JSON after
    `cut_json_at` characters (None → half way): the stream carries the cut JSON,
    a non-streaming body the keys complete before the cut.

    Streaming only: text and tool JSON go out in deltas of `chunk_chars`
    characters, `chunk_delay` seconds before each event after the first, and
    `stall_after` N stops sending after N events, holding the connection open
    until the client gives up (or the fake stops); `end_after` N ends the
    response cleanly after N events, without the rest of the message.
    """

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    stop_reason: str | None = None
    usage: tuple[int, int] | None = None
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    model: str | None = None
    delay: float = 0.0
    cut_json_at: int | None = None
    chunk_chars: int = 12
    chunk_delay: float = 0.0
    stall_after: int | None = None
    end_after: int | None = None


@dataclass
class ErrorReply:
    """An API error in the real shape: ``{"type": "error", "error": {type, message}}``.

    `error_type`/`message` None → the API's usual ones for `status`. `error_code`
    adds ``error.details.error_code`` (e.g. "enforced_spend_limit_reached").

    `after_events` N, for a streaming request: the response starts as a
    normal HTTP 200 stream (of `MID_STREAM_TEXT`) and the error comes as an SSE
    ``error`` event after N events, as the API reports errors that happen once
    a stream has begun. A non-streaming request gets the plain HTTP error.
    """

    status: int
    error_type: str | None = None
    message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error_code: str | None = None
    delay: float = 0.0
    after_events: int | None = None


Responder = Callable[[Request], "Reply | ErrorReply | str"]


def default_responder(request: Request) -> Reply:
    return Reply(text=DEFAULT_TEXT)


# ---------------------------------------------------------------- server


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _error_body(reply: ErrorReply) -> dict[str, Any]:
    error: dict[str, Any] = {
        "type": reply.error_type or _ERROR_TYPES.get(reply.status, "api_error"),
        "message": reply.message
        if reply.message is not None
        else _ERROR_MESSAGES.get(reply.status, "Error"),
    }
    if reply.error_code:
        error["details"] = {"error_code": reply.error_code}
    return {"type": "error", "error": error, "request_id": _new_id("req")}


def prompt_tokens(raw_len: int) -> int:
    """The fake's token count of a request body of `raw_len` bytes."""
    return max(1, raw_len // 4)


def _usage(reply: Reply, raw_len: int, output_tokens: int, cache: CacheUsage) -> dict[str, Any]:
    if reply.usage is not None:
        usage: dict[str, Any] = {"input_tokens": reply.usage[0], "output_tokens": reply.usage[1]}
        read, written, written_1h = (
            reply.cache_read_input_tokens,
            reply.cache_creation_input_tokens,
            0,
        )
    else:
        read, written, written_1h = cache.read, cache.written, cache.written_1h
        uncached = prompt_tokens(raw_len) - read - written
        usage = {"input_tokens": max(0, uncached), "output_tokens": output_tokens}
    if cache.used or read or written:
        usage["cache_creation_input_tokens"] = written
        usage["cache_read_input_tokens"] = read
        usage["cache_creation"] = {
            "ephemeral_5m_input_tokens": written - written_1h,
            "ephemeral_1h_input_tokens": written_1h,
        }
    return usage


def _message_body(
    request: Request, reply: Reply, raw_len: int, cache: CacheUsage | None = None
) -> tuple[dict[str, Any], dict[int, str]]:
    """The response body, and the cut tool input JSON by content index (if any)."""
    content: list[dict[str, Any]] = []
    tool_json: dict[int, str] = {}
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for k, (name, tool_input) in enumerate(reply.tool_calls):
        if reply.stop_reason == "max_tokens" and k == len(reply.tool_calls) - 1:
            tool_json[len(content)], tool_input = cut_json(tool_input, reply.cut_json_at)
        content.append(
            {"type": "tool_use", "id": _new_id("toolu"), "name": name, "input": tool_input}
        )
    output_tokens = max(1, len(json.dumps(content)) // 4)
    usage = _usage(reply, raw_len, output_tokens, cache or CacheUsage())
    body = {
        "id": _new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.model,
        "content": content,
        "stop_reason": reply.stop_reason or ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": usage,
    }
    return body, tool_json


def _client_gone(conn: socket.socket) -> bool:
    """True if the peer closed the connection (it sends nothing while awaiting a reply)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is expected; anything else is a bug.
        if isinstance(sys.exc_info()[1], OSError):  # ConnectionError is an OSError
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.fake._track(self.connection, add=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._track(self.connection, add=False)

    def _send(self, status: int, body: Mapping[str, Any], headers: Mapping[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", str(body.get("request_id") or _new_id("req")))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_event_stream(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", _new_id("req"))
        self.end_headers()
        self.wfile.flush()

    def send_chunk(self, data: bytes) -> None:
        """One chunk of a chunked body; empty `data` ends the body."""
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_error(self, reply: ErrorReply) -> None:
        self._send(reply.status, _error_body(reply), reply.headers)

    def do_GET(self) -> None:
        self._read_body()
        self._send_error(ErrorReply(404, message=f"Not found: GET {self.path}"))

    def do_POST(self) -> None:
        raw = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        fake = self.server.fake
        if path == "/v1/messages":
            fake._serve_messages(self, raw)
        elif path == "/v1/messages/count_tokens":
            fake._serve_count_tokens(self, raw)
        else:
            self._send_error(ErrorReply(404, message=f"Not found: POST {self.path}"))

    def _read_body(self) -> bytes:
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def lower_headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}


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
    or ``authorization`` header is required), then JSON/shape validation (400),
    then the responder. A responder that raises gets a 500 `api_error` and the
    exception is kept in `responder_errors`.

    `cache` is the prompt cache (anthropic_cache.py); its TTLs run on `clock`
    (seconds; `time.monotonic` by default: a benchmark on the time-skipping
    server passes the server's clock). `min_cacheable` overrides the minimum
    cacheable prompt length per model.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        latency: float = 0.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        min_cacheable: Mapping[str, int] | None = None,
    ) -> None:
        self._responder: Responder = responder or default_responder
        self.latency = latency
        self.cache = PromptCache(clock=clock)
        if min_cacheable is not None:
            self.cache.min_cacheable = {**self.cache.min_cacheable, **min_cacheable}
        self.requests: list[Request] = []
        self.count_tokens_requests: list[Request] = []
        self.responder_errors: list[BaseException] = []
        self.max_concurrent = 0
        self.in_flight = 0
        self.base_url = ""
        self._lock = threading.Lock()
        self._failures: deque[ErrorReply] = deque()
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0

    # ------------------------------------------------------------ lifecycle

    def start(self) -> FakeAnthropic:
        """Listen on 127.0.0.1 (a free port; after a stop(), the same port again)."""
        if self._server is not None:
            raise RuntimeError("FakeAnthropic is already running")
        self._stopping.clear()
        server = _Server(("127.0.0.1", self._port), _Handler)
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

    def _serve_messages(self, handler: _Handler, raw: bytes) -> None:
        headers = handler.lower_headers()
        body: Any = None
        parse_error = ""
        try:
            body = json.loads(raw) if raw else None
        except ValueError as exc:
            parse_error = f"Request body is not valid JSON: {exc}"
        request = Request(body=body if isinstance(body, dict) else {}, headers=headers)
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
            else:
                outcome = self._respond(responder, request)
            if isinstance(outcome, str):
                outcome = Reply(text=outcome)
            if not self._think(handler.connection, self.latency + outcome.delay):
                handler.close_connection = True
                return  # stopped, or the client hung up (timed out), while "thinking"
            if isinstance(outcome, ErrorReply):
                if request.stream and outcome.after_events is not None:
                    interrupted, _ = _message_body(request, Reply(text=MID_STREAM_TEXT), len(raw))
                    events = message_events(interrupted, {}, Reply.chunk_chars)
                    error = ("error", _error_body(outcome))
                    self._stream(handler, [*events[: outcome.after_events], error], Reply(), slot)
                else:
                    slot.release()
                    handler._send_error(outcome)
            else:
                cache = self.cache.account(request.body, prompt_tokens(len(raw)))
                message, tool_json = _message_body(request, outcome, len(raw), cache)
                request.usage = message["usage"]
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

    def _stream(self, handler: _Handler, events: list[Event], pace: Reply, slot: _InFlight) -> None:
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
            if self._stopping.is_set() or _client_gone(conn):
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True
            self._stopping.wait(min(0.02, remaining))

    def _serve_count_tokens(self, handler: _Handler, raw: bytes) -> None:
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
        if not (headers.get("x-api-key") or headers.get("authorization")):
            handler._send_error(
                ErrorReply(401, "authentication_error", "x-api-key header is required")
            )
            return
        check = dict(body) if isinstance(body, dict) else body
        if isinstance(check, dict):
            check.setdefault("max_tokens", 1)  # count_tokens takes no max_tokens
        if (problem := validate_messages_request(check)) is not None:
            handler._send_error(ErrorReply(400, "invalid_request_error", problem))
            return
        handler._send(200, {"input_tokens": max(1, len(raw) // 4)}, {})
