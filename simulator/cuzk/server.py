"""A cuzk stand-in on a real grpc.aio server, in process or as ``python -m simulator.cuzk``.

`CuzkStandIn.start` binds the server (port 0 picks one), starts the engine's
GPU workers and returns; `stop` ends both. A ``dies`` stand-in stops its own
server mid-proof: calls in flight fail and connections drop, as when a
rented machine vanishes. Message limits are Curio's (256 MiB). The
simulator's machines give it their clock and interceptors (`start`'s keywords;
simulator/cuzk_hosts.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import grpc.aio

from fleet_agent.cuzk.service import add_servicer, channel_options

from .config import StandInConfig
from .engine import Proved, SleepUntil, StandInEngine
from .service import StandInService

__all__ = ["CuzkStandIn"]


class CuzkStandIn:
    """One running stand-in: its address, engine and server."""

    def __init__(
        self,
        config: StandInConfig,
        server: grpc.aio.Server,
        host: str,
        *,
        clock: Callable[[], float] | None = None,
        sleep_until: SleepUntil | None = None,
        on_proved: Proved | None = None,
    ) -> None:
        self.config = config
        self.server = server
        self.host = host
        self.port = 0
        self.engine = StandInEngine(
            config, on_die=self._on_die, clock=clock, sleep_until=sleep_until, on_proved=on_proved
        )
        self._stopped = asyncio.Event()
        self._stop_task: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls,
        config: StandInConfig | None = None,
        listen: str = "127.0.0.1:0",
        *,
        clock: Callable[[], float] | None = None,
        sleep_until: SleepUntil | None = None,
        on_proved: Proved | None = None,
        interceptors: Sequence[grpc.aio.ServerInterceptor[Any, Any]] = (),
    ) -> CuzkStandIn:
        """Serve a stand-in on `listen` (``host:port``; port 0 picks a free one).
        `clock`, `sleep_until` and `on_proved` go to its engine (`StandInEngine`);
        `interceptors` see every call first."""
        host = listen.rsplit(":", 1)[0]
        server = grpc.aio.server(options=channel_options(), interceptors=list(interceptors))
        standin = cls(
            config or StandInConfig(),
            server,
            host,
            clock=clock,
            sleep_until=sleep_until,
            on_proved=on_proved,
        )
        add_servicer(server, StandInService(standin.engine))
        standin.port = server.add_insecure_port(listen)
        await server.start()
        standin.engine.start()
        return standin

    @property
    def address(self) -> str:
        """``host:port`` to connect to."""
        return f"{self.host}:{self.port}"

    @property
    def stopped(self) -> bool:
        """Whether the server has stopped (asked to, or died)."""
        return self._stopped.is_set()

    async def stop(self) -> None:
        """Stop serving at once (calls in flight fail) and stop the engine."""
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._stop())
        await asyncio.shield(self._stop_task)

    async def wait_stopped(self) -> None:
        """Return when the server has stopped."""
        await self._stopped.wait()

    def _on_die(self) -> None:
        if self._stop_task is None:
            self._stop_task = asyncio.create_task(self._stop())

    async def _stop(self) -> None:
        await self.server.stop(grace=None)
        await self.engine.stop()
        self._stopped.set()
