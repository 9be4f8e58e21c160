"""A tiny vast.ai stand-in over real HTTP, for answers the simulator does not give.

`VastStub` serves whatever its `answer` function returns and records every
request with the moment it arrived (``time.monotonic``), so a test can check
the spacing a client keeps, or feed the client recorded rows (an instance
``stopped`` by its host, a destroyed row still listed) that the simulator's
market does not produce.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

__all__ = ["StubRequest", "VastStub", "instances_page"]


@dataclass(frozen=True)
class StubRequest:
    method: str
    path: str
    params: dict[str, str]
    body: Any
    at: float  # time.monotonic() on arrival


#: (status, JSON body) or (status, plain text)
Answer = tuple[int, Any]


def instances_page(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A one-page ``GET /api/v1/instances/`` answer."""
    return {
        "success": True,
        "instances_found": len(rows),
        "total_instances": len(rows),
        "next_token": None,
        "instances": rows,
    }


class VastStub:
    """``with VastStub(answer) as stub: ... stub.url ... stub.requests``."""

    def __init__(self, answer: Callable[[StubRequest], Answer]) -> None:
        self.requests: list[StubRequest] = []
        self._answer = answer
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                at = time.monotonic()
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                req = StubRequest(
                    method=self.command,
                    path=parts.path,
                    params={k: v[-1] for k, v in parse_qs(parts.query).items()},
                    body=json.loads(raw) if raw.strip() else None,
                    at=at,
                )
                with stub._lock:
                    stub.requests.append(req)
                status, body = stub._answer(req)
                if isinstance(body, str):
                    data, ctype = body.encode(), "text/plain; charset=utf-8"
                else:
                    data, ctype = json.dumps(body).encode(), "application/json"
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()

    def arrivals(self, method: str, path_prefix: str = "") -> list[float]:
        """Arrival times of the requests with `method` under `path_prefix`."""
        with self._lock:
            return [
                r.at for r in self.requests if r.method == method and r.path.startswith(path_prefix)
            ]
