"""uvicorn in a background thread with its own event loop.

The simulator runs inside test processes (often beside a Temporal test
environment's loop) and in the foreground of ``fleet-agent sim``; in both the
caller's thread stays free, so the server gets a thread and a loop of its own.
uvicorn only installs signal handlers from the main thread, so this thread
leaves the process's Ctrl-C handling alone.

A server made without a port listens on nothing of its own and serves the
connections it is handed (`adopt`): the prover gateway accepts on its many
per-instance ports itself and passes each connection on.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.types import ASGIApp

__all__ = ["ThreadedServer"]

_START_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 5.0
# What uvicorn gives requests still running at a stop before cancelling them.
_GRACE_S = 2
# Fleets fan out; the default backlog would drop SYNs, and a dropped SYN is
# retried after 1 s, 3 s, ... and looks like a timeout.
_BACKLOG = 1024
# Idle keep-alive connections are kept this long. uvicorn's default of 5 s
# closes pooled httpx connections under a client that pauses between polls;
# one closed just as a request goes out fails that request.
_KEEP_ALIVE_S = 600


class _Server(uvicorn.Server):
    """uvicorn whose stop is prompt: its main loop wakes on `wake` rather
    than polling `should_exit` every 0.1 s."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.wake: asyncio.Event | None = None
        #: Set once the sockets are served (or the thread ended without).
        self.ready = threading.Event()
        # The loop keeps only weak references to tasks.
        self.adopting: set[asyncio.Task[Any]] = set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    async def main_loop(self) -> None:
        self.wake = asyncio.Event()
        # on_tick(0) refreshes the Date and Server headers (uvicorn does it
        # once a second) and reports should_exit.
        while not await self.on_tick(0):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=1.0)


class ThreadedServer:
    """`app` served on host:port (0: a free port; None: no listener) from a
    daemon thread."""

    def __init__(
        self, app: ASGIApp, host: str, port: int | None, *, name: str, server_header: str
    ) -> None:
        self._app = app
        self._address: tuple[str, int | None] = (host, port)
        self._name = name
        self._server_header = server_header
        self._sock: socket.socket | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound host and port (the real port when 0 was asked)."""
        if self._sock is None:
            raise RuntimeError("the server is not started")
        host, port = self._sock.getsockname()[:2]
        return str(host), int(port)

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> bool:
        """Run `callback(*args)` on the server's loop (from any thread);
        False if the server is not running."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return False
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop closed meanwhile
            return False
        return True

    def adopt(
        self, conn: socket.socket, wrap: Callable[[asyncio.Protocol], asyncio.Protocol]
    ) -> None:
        """Serve an accepted connection (from any thread); `wrap` gets uvicorn's
        protocol for it and returns the protocol to run. Closed if not running."""
        server = self._server
        if server is None or not self.call_soon(self._adopt, server, conn, wrap):
            conn.close()

    @staticmethod
    def _adopt(
        server: _Server, conn: socket.socket, wrap: Callable[[asyncio.Protocol], asyncio.Protocol]
    ) -> None:
        config = server.config

        def protocol() -> asyncio.Protocol:
            # What uvicorn's own startup builds for each connection it accepts.
            inner: asyncio.Protocol = config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=server.server_state, app_state=server.lifespan.state
            )
            return wrap(inner)

        if server.should_exit:
            conn.close()
            return
        loop = asyncio.get_running_loop()
        task = loop.create_task(loop.connect_accepted_socket(protocol, conn))
        server.adopting.add(task)

        def failed(done: asyncio.Task[Any]) -> None:
            server.adopting.discard(done)
            if not done.cancelled() and done.exception() is not None:
                conn.close()  # e.g. the client reset it before the loop got to it

        task.add_done_callback(failed)

    def start(self) -> None:
        """Bind, serve, and return once the port accepts connections."""
        if self._server is not None:
            return
        sock = self._bind() if self._address[1] is not None else None
        config = uvicorn.Config(
            self._app,
            # httptools (a C parser) when installed, as the project declares;
            # h11 otherwise. Against the stdlib server it replaced, h11 cost
            # a third of the throughput of cheap requests, httptools less.
            http="auto",
            loop="asyncio",
            lifespan="off",
            access_log=False,
            log_config=None,  # leave the host process's logging configuration alone
            log_level="warning",
            backlog=_BACKLOG,
            timeout_keep_alive=_KEEP_ALIVE_S,
            timeout_graceful_shutdown=_GRACE_S,
            server_header=False,
            headers=[("server", self._server_header)],
        )
        server = _Server(config)
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(server.serve(sockets=[sock] if sock else []))
            except BaseException as exc:  # reported to start(), or logged by the thread
                failure.append(exc)
                raise
            finally:
                server.ready.set()
                loop.close()

        self._sock, self._server = sock, server
        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        if not server.ready.wait(_START_TIMEOUT_S) or failure or not server.started:
            self.stop()
            raise RuntimeError(f"{self._name} did not start") from (failure[0] if failure else None)

    def _bind(self) -> socket.socket:
        # Bound here so a port-0 server knows its port before uvicorn starts,
        # and a taken port fails in the caller (uvicorn would log and exit).
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY on accepted sockets only
        # when the protocol says TCP, and uvicorn writes headers and body
        # apart; with Nagle on, every answer would wait ~40 ms for an ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._address[0], self._address[1] or 0))
            sock.listen(_BACKLOG)
        except OSError:
            sock.close()
            raise
        return sock

    def begin_stop(self) -> None:
        """Ask the server to stop without waiting (`stop` waits): uvicorn
        gives open connections 0.1 s, which two servers can spend at once."""
        server = self._server
        if server is None:
            return
        server.should_exit = True
        if server.wake is not None:
            self.call_soon(server.wake.set)

    def stop(self) -> None:
        """Stop serving, close the listening socket, and join the thread."""
        server, thread, sock = self._server, self._thread, self._sock
        if server is None:
            return
        self.begin_stop()
        if thread is not None:
            thread.join(timeout=_STOP_TIMEOUT_S)
        if sock is not None:
            sock.close()
        self._server = self._thread = self._sock = self._loop = None
