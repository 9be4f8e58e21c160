"""The fake Messages API's HTTP plumbing: a threading HTTP server whose handler
hands POST /v1/messages and /v1/messages/count_tokens to its `FakeAnthropic`
(anthropic_server.py), and writes JSON bodies and chunked event streams.
"""

from __future__ import annotations

import json
import select
import socket
import sys
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from .anthropic_payloads import ErrorReply, error_body, new_id

if TYPE_CHECKING:
    from .anthropic_server import FakeAnthropic

__all__ = ["Handler", "Server", "client_gone"]


def client_gone(conn: socket.socket) -> bool:
    """True if the peer closed the connection (it sends nothing while awaiting a reply)."""
    try:
        readable, _, _ = select.select([conn], [], [], 0)
        return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is expected; anything else is a bug.
        if isinstance(sys.exc_info()[1], OSError):  # ConnectionError is an OSError
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

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
        self.send_header("request-id", str(body.get("request_id") or new_id("req")))
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
        self.send_header("request-id", new_id("req"))
        self.end_headers()
        self.wfile.flush()

    def send_chunk(self, data: bytes) -> None:
        """One chunk of a chunked body; empty `data` ends the body."""
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _send_error(self, reply: ErrorReply) -> None:
        self._send(reply.status, error_body(reply), reply.headers)

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
