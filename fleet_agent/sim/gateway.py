"""The rented machines' side of the network: each prover's status port.

On vast.ai a container port is reached at the instance's ``public_ipaddr`` and
the host port its ``ports`` mapping names. The simulator does the same with
one real listening socket per instance (on the simulator's host), all served
by one selector thread; a connection gets its own thread. What a connection
gets depends on the machine at that moment (`Market.prover_endpoint`):

* running: ``GET /status`` answers the prover's JSON status (other paths 404);
* frozen: the connection is accepted and never answered (a paused container);
* anything else (loading, stopped, rebooting, dead): closed without an answer,
  as when nothing listens behind the port.
"""

from __future__ import annotations

import contextlib
import json
import logging
import selectors
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from .control import ProverAnswer
from .prover import PROVER_STATUS_PATH

__all__ = ["ProverGateway"]

_log = logging.getLogger(__name__)
_HANG_S = 30.0


class _Conn:
    """What a handler needs to know about its listener (stands in for a server)."""

    def __init__(self, gateway: ProverGateway, instance_id: int) -> None:
        self.gateway = gateway
        self.instance_id = instance_id


class _StatusHandler(BaseHTTPRequestHandler):
    server: _Conn  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"
    server_version = "snark-prover-sim/1"
    disable_nagle_algorithm = True
    timeout = 60  # an idle keep-alive connection does not hold its thread forever

    def handle_one_request(self) -> None:
        kind, _ = self.server.gateway.answer(self.server.instance_id)
        if kind == "closed":
            self.close_connection = True
            return
        if kind == "hang":
            self.server.gateway.stopping.wait(_HANG_S)
            self.close_connection = True
            return
        super().handle_one_request()

    def do_GET(self) -> None:
        kind, body = self.server.gateway.answer(self.server.instance_id)
        if kind != "ok" or body is None:
            self.close_connection = True
            return
        if self.path.split("?")[0].rstrip("/") != PROVER_STATUS_PATH:
            self._send(404, {"error": "not found"})
            return
        self._send(200, body)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        payload = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("prover %s: " + format, self.server.instance_id, *args)


class ProverGateway:
    """Listening sockets for instances' prover ports, served by one thread."""

    def __init__(self, host: str, answer: Callable[[int], ProverAnswer]) -> None:
        self.host = host
        self.answer = answer
        self.stopping = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._sockets: dict[int, socket.socket] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def open(self, instance_id: int, preferred: int | None = None) -> int:
        """Listen for `instance_id` (on `preferred` if it is free); returns the port."""
        self.close(instance_id)
        sock: socket.socket | None = None
        for port in ([preferred] if preferred else []) + [0]:
            candidate = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                candidate.bind((self.host, port))
            except OSError:
                candidate.close()
                continue
            sock = candidate
            break
        if sock is None:  # pragma: no cover - port 0 always binds
            raise OSError("no port for the prover listener")
        sock.listen(64)
        sock.setblocking(False)
        with self._lock:
            self._sockets[instance_id] = sock
            self._selector.register(sock, selectors.EVENT_READ, instance_id)
        return int(sock.getsockname()[1])

    def close(self, instance_id: int) -> None:
        """Stop listening for `instance_id` (nothing if it has no listener)."""
        with self._lock:
            sock = self._sockets.pop(instance_id, None)
            if sock is None:
                return
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
        sock.close()

    def start(self) -> None:
        """Serve in a background thread."""
        if self._thread is not None:
            return
        self.stopping.clear()
        self._thread = threading.Thread(target=self._serve, name="vast-sim-provers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close every listener."""
        self.stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        for instance_id in list(self._sockets):
            self.close(instance_id)

    def _serve(self) -> None:
        while not self.stopping.is_set():
            with self._lock:
                empty = not self._sockets
            if empty:
                self.stopping.wait(0.05)
                continue
            try:
                events = self._selector.select(timeout=0.1)
            except (OSError, ValueError):
                continue  # a listener closed while we waited
            for key, _ in events:
                listener = key.fileobj
                if not isinstance(listener, socket.socket):
                    continue
                try:
                    conn, addr = listener.accept()
                except (BlockingIOError, OSError):
                    continue
                conn.setblocking(True)
                threading.Thread(
                    target=self._handle, args=(conn, addr, int(key.data)), daemon=True
                ).start()

    def _handle(self, conn: socket.socket, addr: Any, instance_id: int) -> None:
        try:
            _StatusHandler(conn, addr, _Conn(self, instance_id))  # type: ignore[arg-type]
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.close()
