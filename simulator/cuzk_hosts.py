"""The rented machines' cuzk in router mode: a real gRPC server behind the real front.

Each simulated machine whose create is in router mode
(simulator/cuzk_machine.py) gets a port on the simulator's host, which its
row maps to the front's container port (9821/tcp), as the status port is.
While its cuzk is down the port is bound and not listening: a connection is
refused, as when nothing in the container listens. While it is up, the
machine runs what the router image runs (prover_image/): the image's own
front (prover_image/front.py: TLS 1.2+ with the machine's certificate, a
client certificate from the CA in its create, CN ``fleet-router`` with
clientAuth, ALPN h2) on that port, piping to a cuzk stand-in
(simulator/cuzk/) on an insecure loopback port, with the machine's GPUs and
its proof times. The real front, not grpc's own TLS server, so the
simulator tests the front's rule end to end; it costs one asyncio server
and two copies of each byte.

All of it runs on one event loop in a thread of its own. A reconcile pass
reads every router-mode machine from the market (`CuzkView`, at least every
`RECONCILE_S` real seconds, and at once when the market pokes it) and starts,
stops or freezes its servers: stopped, rebooting, dead or destroyed drops
the listener and every connection (calls in flight fail mid-proof); frozen
or offline holds every call unanswered (new connections still finish their
TLS handshake: the front runs, the stand-in does not answer). Proofs take
their time on the simulator's clock (`_Host.sleep_until`): at its speed,
moved by `advance`, paused while the machine is frozen or its prover stuck
(as the reconcile pass sees it: within a pass of the change). Each
finished proof is counted in the market (`Market.cuzk_proved`); a ``dies``
stand-in's machine exits (`Market.cuzk_died`).

Touches: the sockets it binds, private temporary files for TLS
(cuzk_machine.py ``front_context``), and the market through the callbacks
it is given. It never waits for the market while holding its own lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import ssl
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc
import grpc.aio

from fleet_agent.cuzk.service import pb
from prover_image import front

from .clock import SimClock
from .cuzk import CuzkStandIn, StandInConfig
from .cuzk_machine import CuzkView, behaviour

__all__ = ["RECONCILE_S", "CuzkHosts"]

_log = logging.getLogger(__name__)

if TYPE_CHECKING:  # generic in the stubs only
    _Interceptor = grpc.aio.ServerInterceptor[Any, Any]
    _Handler = grpc.RpcMethodHandler[Any, Any]
else:
    _Interceptor = grpc.aio.ServerInterceptor

#: Real seconds between two reconcile passes when nothing pokes it.
RECONCILE_S = 0.1
_STOP_JOIN_S = 10.0
#: A float's sim seconds left that count as none.
_EPSILON_S = 1e-6


class _Front(front.Front):
    """The image's front, which also knows its connections, to drop them as
    a machine that stops drops them (reset, no TLS goodbye: a graceful TLS
    close waits for a peer that may never answer, and a call in flight would
    hang instead of failing). Everything else is front.py's own code."""

    def __init__(self, context: ssl.SSLContext, upstream: tuple[str, int]) -> None:
        super().__init__(context, upstream)
        self.writers: set[asyncio.StreamWriter] = set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            await super()._accept(reader, writer)
        finally:
            self.writers.discard(writer)

    def drop(self) -> None:
        """Reset every connection now (the TLS one, whatever layer it is at)."""
        for writer in list(self.writers):
            writer.transport.abort()


class _Gate(_Interceptor):
    """Holds every call while the machine is frozen (a paused container)."""

    def __init__(self, reachable: asyncio.Event) -> None:
        self.reachable = reachable

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> _Handler:
        await self.reachable.wait()
        return await continuation(handler_call_details)


@dataclasses.dataclass(eq=False)
class _Host:
    """One router-mode machine's side: its port and, while up, its servers."""

    instance_id: int
    port: int
    context: ssl.SSLContext | None
    reservation: socket.socket | None
    owner: CuzkHosts
    standin: CuzkStandIn | None = None
    proxy: _Front | None = None
    server: asyncio.Server | None = None
    watcher: asyncio.Task[None] | None = None
    epoch: float | None = None
    paused: bool = False
    paused_since: float | None = None
    paused_total: float = 0.0
    reachable: asyncio.Event | None = None
    spec: dict[str, Any] = dataclasses.field(default_factory=lambda: {"mode": "honest"})
    rev: int = -1
    #: (rev, engine) the behaviour was last applied to.
    applied: tuple[int, int] | None = None
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    stopping: bool = False

    def running_now(self) -> float:
        """This machine's running time: the simulator's clock less the time
        it was paused (its cuzk's clock: a paused machine proves nothing)."""
        now = self.owner.clock.now()
        paused = now - self.paused_since if self.paused_since is not None else 0.0
        return now - self.paused_total - paused

    def set_paused(self, paused: bool) -> None:
        """Pause or resume its running time (on the loop)."""
        if paused == self.paused:
            return
        now = self.owner.clock.now()
        if paused:
            self.paused_since = now
        elif self.paused_since is not None:
            self.paused_total += now - self.paused_since
            self.paused_since = None
        self.paused = paused

    async def sleep_until(self, at: float) -> None:
        """Wait until its running time reads `at`: at the clock's speed,
        moved by the clock's jumps, not at all while paused."""
        clock = self.owner.clock
        while (left := at - self.running_now()) > _EPSILON_S:
            speed = clock.speed
            within = None if self.paused or speed <= 0 else left / speed
            await self.owner.changed(within)

    def apply(self, spec: dict[str, Any], rev: int) -> None:
        """Use behaviour `spec` (revision `rev`) from now, on the running
        engine too (any thread: a control call sees it take effect at once).
        An older revision than the last one is ignored: a reconcile pass that
        read the market before a control call must not undo it."""
        with self.lock:
            if rev < self.rev:
                return
            self.spec, self.rev = spec, rev
            standin = self.standin
            if standin is None:
                return
            engine = standin.engine
            key = (rev, id(engine))
            if self.applied == key:
                return
            engine.config = dataclasses.replace(
                engine.config, behaviour=behaviour(spec, engine.total_completed)
            )
            self.applied = key


class CuzkHosts:
    """Every router-mode machine's front and cuzk, on one loop of its own.

    `views` reads the market (`Market.cuzk_views`), `proved(instance, kind,
    bad)` counts a finished proof, `died(instance)` tells the market a
    ``dies`` cuzk took its machine down; `bind` sets them and the market's
    clock (the market is made after this)."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.clock = SimClock(speed=0.0)
        self.views: Callable[[], dict[int, CuzkView]] | None = None
        self.proved: Callable[[int, int, bool], None] | None = None
        self.died: Callable[[int], None] | None = None
        self._hosts: dict[int, _Host] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._poked: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None
        self._stop = False
        self._closing: set[asyncio.Task[None]] = set()

    def bind(
        self,
        clock: SimClock,
        views: Callable[[], dict[int, CuzkView]],
        proved: Callable[[int, int, bool], None],
        died: Callable[[int], None],
    ) -> None:
        """Connect it to its market (its clock, and the callbacks above)."""
        self.clock = clock
        self.views, self.proved, self.died = views, proved, died

    # ---------------------------------------------------- any thread

    def reserve(
        self, instance_id: int, preferred: int | None, context: ssl.SSLContext | None
    ) -> int:
        """A host port for `instance_id`'s front (`preferred` if free), bound
        and not listening; `context` is its front's TLS (None: the image
        refused, nothing will listen). Returns the port."""
        self.release(instance_id)
        sock = _reserve(self.host, preferred)
        host = _Host(instance_id, int(sock.getsockname()[1]), context, sock, self)
        with self._lock:
            self._hosts[instance_id] = host
        self.poke()
        return host.port

    def release(self, instance_id: int) -> None:
        """Forget `instance_id`: its servers stop, its port is freed."""
        with self._lock:
            host = self._hosts.pop(instance_id, None)
        if host is None:
            return
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                asyncio.run_coroutine_threadsafe(self._retire(host), loop)
                return
        _close(host.reservation)
        host.reservation = None

    def set_behaviour(self, instance_id: int, spec: dict[str, Any], rev: int) -> None:
        """`instance_id`'s cuzk behaves as `spec` says from now."""
        with self._lock:
            host = self._hosts.get(instance_id)
        if host is not None:
            host.apply(spec, rev)

    def poke(self) -> None:
        """Something changed (the clock, a machine): reconcile now, and let
        every proof look at the clock again."""
        loop, poked = self._loop, self._poked
        if loop is None or poked is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._wake)

    def start(self) -> None:
        """Run the loop in a background thread."""
        if self._thread is not None:
            return
        self._stop = False
        ready = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="vast-sim-cuzk", daemon=True
        )
        self._thread.start()
        ready.wait(_STOP_JOIN_S)

    def stop(self) -> None:
        """Stop every server and the loop, and free every port (as the
        status gateway closes its listeners)."""
        thread = self._thread
        if thread is not None:
            self._stop = True
            self.poke()
            thread.join(_STOP_JOIN_S)
            self._thread = None
        with self._lock:
            hosts = list(self._hosts.values())
            self._hosts.clear()
        for host in hosts:
            _close(host.reservation)
            host.reservation = None

    def ports(self) -> dict[int, int]:
        """Host port by instance (for tests and the state report)."""
        with self._lock:
            return {i: h.port for i, h in self._hosts.items()}

    # ------------------------------------------------------- the loop

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(_quiet_cancels)
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ready))
        finally:
            self._loop = None
            loop.close()

    async def _main(self, ready: threading.Event) -> None:
        self._poked, self._changed = asyncio.Event(), asyncio.Event()
        ready.set()
        try:
            while not self._stop:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._poked.wait(), RECONCILE_S)
                self._poked.clear()
                if self._stop:
                    break
                try:
                    await self._reconcile()
                except Exception:  # one bad pass must not end every machine's cuzk
                    _log.exception("cuzk hosts: reconcile failed")
        finally:
            with self._lock:
                hosts = list(self._hosts.values())
            for host in hosts:
                await self._down(host)
            self._poked = self._changed = None
            # Connections still closing, and whatever else is left: ended now.
            rest = asyncio.all_tasks() - {asyncio.current_task()}
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

    def _wake(self) -> None:
        if self._poked is not None:
            self._poked.set()
        self._bump()

    def _bump(self) -> None:
        """Wake every proof waiting on the clock (they look at it again)."""
        changed = self._changed
        if changed is not None:
            self._changed = asyncio.Event()
            changed.set()

    async def changed(self, within: float | None) -> None:
        """Return when something changed, or after `within` real seconds."""
        changed = self._changed
        if changed is None:  # stopping
            await asyncio.sleep(0.05)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), within)

    async def _reconcile(self) -> None:
        with self._lock:
            hosts = dict(self._hosts)
        if not hosts or self.views is None:
            return
        views = await asyncio.to_thread(self.views)
        bump = False
        for instance_id, host in hosts.items():
            view = views.get(instance_id)
            want = view.state if view is not None and host.context is not None else "down"
            if host.standin is not None and (
                want == "down" or (view is not None and view.epoch != host.epoch)
            ):
                await self._down(host)  # stopped, dead, or a new process
            if view is not None:
                host.apply(view.spec, view.rev)
            if want != "down" and view is not None and host.standin is None:
                await self._up(host, view)
            paused = view is not None and view.paused
            if paused != host.paused:
                host.set_paused(paused)
                bump = True
            if host.reachable is not None:
                if want == "frozen":
                    host.reachable.clear()
                else:
                    host.reachable.set()
        if bump:
            self._bump()

    async def _up(self, host: _Host, view: CuzkView) -> None:
        """Start the machine's cuzk and its front on its port."""
        if host.context is None or not view.proof_seconds:
            return
        reachable = asyncio.Event()
        reachable.set()
        config = StandInConfig(
            gpus=view.gpus,
            proof_seconds=view.proof_seconds,
            # cuzk loads SRS on demand (curio extern/cuzk/cuzk-core/src/engine.rs
            # ``start``: "no preload"; config.rs: ``srs.preload`` is deprecated):
            # nothing is loaded until PreloadSRS or a first proof.
            preload=(),
            preload_seconds=view.srs_load_s,
            gpu_name=view.gpu_name,
            vram_total_bytes=view.vram_bytes,
        )
        instance_id = host.instance_id

        def proved(req: pb.SubmitProofRequest, bad: bool) -> None:
            if self.proved is not None:
                self.proved(instance_id, req.proof_kind, bad)

        standin = await CuzkStandIn.start(
            config,
            "127.0.0.1:0",
            clock=host.running_now,
            sleep_until=host.sleep_until,
            on_proved=proved,
            interceptors=[_Gate(reachable)],
        )
        proxy = _Front(host.context, ("127.0.0.1", standin.port))
        _close(host.reservation)
        host.reservation = None
        try:
            server = await proxy.serve(self.host, host.port)
        except OSError as exc:
            # Taken in the moment between: try again on the next pass.
            _log.warning("cuzk hosts: port %s of %s: %s", host.port, instance_id, exc)
            await standin.stop()
            with contextlib.suppress(OSError):
                host.reservation = _reserve(self.host, host.port, fallback=False)
            return
        with host.lock:
            host.standin, host.proxy, host.server = standin, proxy, server
            host.reachable, host.epoch, host.stopping = reachable, view.epoch, False
            host.applied = None
        host.apply(host.spec, host.rev)
        host.watcher = asyncio.create_task(self._watch(host, standin))

    async def _watch(self, host: _Host, standin: CuzkStandIn) -> None:
        """A stand-in that stops by itself died (``dies``): its machine exits."""
        await standin.wait_stopped()
        if host.stopping or host.standin is not standin or self.died is None:
            return
        await asyncio.to_thread(self.died, host.instance_id)
        self._wake()

    async def _down(self, host: _Host) -> None:
        """Stop the front (every connection drops) and cuzk; the port stays reserved."""
        standin, proxy, server = host.standin, host.proxy, host.server
        if standin is None:
            return
        host.stopping = True
        with host.lock:
            host.standin = host.proxy = host.server = None
            host.applied = None
        if host.reachable is not None:
            host.reachable.set()  # held calls go on, to fail with the server
        host.reachable = None
        if server is not None:
            server.close()
        if proxy is not None:
            proxy.drop()
            # Its connections end now; no pass waits for their tasks to see
            # it (a hundred machines may stop in one).
            closing = asyncio.create_task(proxy.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        await standin.stop()
        if host.watcher is not None:
            host.watcher.cancel()
            host.watcher = None
        with self._lock:
            current = self._hosts.get(host.instance_id) is host
        if current and host.reservation is None:
            try:
                host.reservation = _reserve(self.host, host.port, fallback=False)
            except OSError as exc:  # taken meanwhile: the next start tries again
                _log.warning("cuzk hosts: port %s of %s: %s", host.port, host.instance_id, exc)

    async def _retire(self, host: _Host) -> None:
        await self._down(host)
        _close(host.reservation)
        host.reservation = None


def _quiet_cancels(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler, without the front's cancelled
    connections: Python 3.11's stream callback asks a cancelled task for its
    exception (3.12 checks first), and each `Front.close` would log a
    traceback per connection it drops."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(context)


def _reserve(host: str, port: int | None, *, fallback: bool = True) -> socket.socket:
    """A socket bound to `port` (any free one if taken and `fallback`, or
    if None) and not listening: connections to it are refused."""
    for candidate in ([port] if port else []) + ([0] if fallback or not port else []):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError:
            sock.close()
            continue
        return sock
    raise OSError(f"cannot bind {host}:{port}")


def _close(sock: socket.socket | None) -> None:
    if sock is not None:
        sock.close()
