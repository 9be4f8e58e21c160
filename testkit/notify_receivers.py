"""Real receivers for notifications, driven through apprise URLs: an HTTP
server for apprise's JSON webhook (`json://`) and an SMTP server (aiosmtpd)
for e-mail (`mailto://`). Used by tests/notify/ and
bench/perf/notify_latency.py.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller

__all__ = ["Mail", "Post", "SmtpReceiver", "WebhookReceiver"]


@dataclass(frozen=True)
class Post:
    """One webhook POST: its path, its JSON body, when it arrived (monotonic,
    and by the wall clock for comparing with a workflow's time)."""

    path: str
    body: dict[str, Any]
    at: float
    wall: float = 0.0


class WebhookReceiver:
    """Records every POST; answers `status` (200, or e.g. 500 to fail them)."""

    def __init__(self, status: int = 200, *, fail_first: int = 0) -> None:
        self.posts: list[Post] = []
        self.status = status
        #: Answer the first `fail_first` POSTs with 500 (a flaky destination).
        self.fail_first = fail_first
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"raw": raw.decode(errors="replace")}
                receiver.posts.append(Post(self.path, body, time.monotonic(), time.time()))
                failing = len(receiver.posts) <= receiver.fail_first
                self.send_response(500 if failing else receiver.status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str = "hook") -> str:
        """The apprise URL of this receiver (json://: apprise POSTs JSON)."""
        return f"json://127.0.0.1:{self.port}/{path}"

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    message: Message = field(repr=False)
    at: float

    def text(self) -> str:
        """Subject and every text part, decoded."""
        parts = [str(self.message.get("Subject", ""))]
        for part in self.message.walk():
            if part.get_content_maintype() == "text":
                payload = part.get_payload(decode=True)
                if isinstance(payload, bytes):
                    parts.append(payload.decode(errors="replace"))
        return "\n".join(parts)


class SmtpReceiver:
    """An SMTP server on 127.0.0.1:`port` (no TLS, no auth) that keeps every mail."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.mails: list[Mail] = []
        receiver = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                receiver.mails.append(
                    Mail(
                        envelope.mail_from,
                        list(envelope.rcpt_tos),
                        message_from_bytes(envelope.original_content or envelope.content),
                        time.monotonic(),
                    )
                )
                return "250 OK"

        self._controller = Controller(Handler(), hostname="127.0.0.1", port=port)

    def url(self, to: str = "ops@example.com") -> str:
        """apprise's mailto:// for this server: plain SMTP (mode=insecure) at
        `smtp=` and `port=`, from and to set (no login)."""
        return (
            f"mailto://fleet@example.com?smtp=127.0.0.1&port={self.port}"
            f"&from=fleet@example.com&to={to}&mode=insecure"
        )

    def __enter__(self) -> SmtpReceiver:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()
