"""The rented machines' side of the network: each prover's status port.

On vast.ai a container port is reached at the instance's ``public_ipaddr`` and
the host port its ``ports`` mapping names. The simulator does the same with
one real listening socket per instance (on the simulator's host), opened and
closed as machines come and go, all accepted by one selector thread: uvicorn
serves a fixed set of sockets, so the accepting stays here. Each accepted
connection goes to uvicorn, on a loop of its own (`ThreadedServer` without a
listener), serving the Starlette app of `simulator.prover_http`, which
says what a running, frozen or dead machine answers.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .control import DrainAnswer, ProverAnswer
from .prover_http import Connections, create_status_app
from .threaded import ThreadedServer

__all__ = ["ProverGateway"]

_log = logging.getLogger(__name__)
# Threads reading the market for status requests, and holding frozen
# machines' requests (30 s each); they start on demand.
_THREADS = 64


class ProverGateway:
    """Listening sockets for instances' prover ports, served by one thread."""

    def __init__(
        self,
        host: str,
        answer: Callable[[int], ProverAnswer],
        drain: Callable[[int, str], DrainAnswer] | None = None,
        hostile_sent: Callable[[int, float], None] | None = None,
    ) -> None:
        self.host = host
        self.answer = answer
        self.drain = drain
        self.hostile_sent = hostile_sent
        self.stopping = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._sockets: dict[int, socket.socket] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._http: ThreadedServer | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._connections = Connections()

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
        executor = ThreadPoolExecutor(_THREADS, thread_name_prefix="vast-sim-prover")
        app = create_status_app(
            self.answer,
            self._connections,
            self.stopping,
            executor,
            self.drain,
            self.hostile_sent,
        )
        http = ThreadedServer(
            app, self.host, None, name="vast-sim-provers-http", server_header="snark-prover-sim/1"
        )
        http.start()
        self._http, self._executor = http, executor
        self._thread = threading.Thread(target=self._serve, name="vast-sim-provers", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close every listener."""
        # Set first: frozen machines' requests waiting in pool threads end now.
        self.stopping.set()
        if self._http is not None:
            self._http.begin_stop()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._http is not None:
            self._http.stop()
            self._http = None
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
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
                    conn, _ = listener.accept()
                except (BlockingIOError, OSError):
                    continue
                # Headers and body go out in two writes; with Nagle on, the
                # client would wait for a delayed ACK (~40 ms) on every answer.
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                http = self._http
                if http is None:
                    conn.close()
                    continue
                http.adopt(conn, self._connections.wrapper(int(key.data)))
