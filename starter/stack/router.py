"""The local stack's router and Curio stand-in (router mode, `fleet-agent up`).

`stack_router` runs the cuzk router (router/, as `fleet-agent router` does)
in `up`'s own event loop: it listens where Curio's ``[Cuzk] Address`` points
(FLEET_ROUTER_LISTEN, else 127.0.0.1:9820 for the default stack when free,
else a free port), reads the members the agent's monitor writes to the
stack's store and writes its witness and queue back (router/store_sync.py),
and dials each simulated machine over TLS with the stack's CA
(router/__main__.py `tls_connect`), its expected proof times at the
simulator's speed.

`stack_curio` runs the Curio stand-in (simulator/curio/) against it: PoRep
SNARKs arriving along a daily curve (the `--sim-demand` one, else a flat
`DEFAULT_CURIO_RATE`), on a clock that starts at the current UTC time and
runs at the simulator's speed, as the simulator's own does; a summary line
every `SUMMARY_EVERY_S` real seconds. It touches only the router's address.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starter.agent_client import CliError
from starter.stack.guard import port_taken

if TYPE_CHECKING:
    from simulator import DemandConfig
    from simulator.curio.node import CurioStandIn
    from simulator.curio.records import CurioSummary

__all__ = [
    "CURIO_INPUT_MB",
    "DEFAULT_CURIO_RATE",
    "DEFAULT_ROUTER_PORT",
    "SUMMARY_EVERY_S",
    "curio_demand",
    "curio_line",
    "router_listen",
    "stack_curio",
    "stack_router",
]

#: Curio's default ``[Cuzk] Address`` port (cuzk's own): a Curio node with
#: no [Cuzk] Address change reaches the default stack's router.
DEFAULT_ROUTER_PORT = 9820
#: Proofs/hour (Curio time) the stand-in sends without `--sim-demand`: one a
#: minute, within one simulated machine's rate (25-100/h), so a newcomer sees
#: proofs flow without options.
DEFAULT_CURIO_RATE = 60.0
#: Each vanilla proof's size, MB. A 32 GiB PoRep's is 50-200 MB; the local
#: stack sends less so Curio, the router and the machines hold little.
CURIO_INPUT_MB = 4.0
#: How often the stand-in prints its summary, real seconds.
SUMMARY_EVERY_S = 60.0
LISTEN_ENV = "FLEET_ROUTER_LISTEN"


def router_listen(default_stack: bool) -> str:
    """Where the router listens: FLEET_ROUTER_LISTEN, else 127.0.0.1:9820 for
    the default stack when nothing listens there, else any free port."""
    if listen := os.environ.get(LISTEN_ENV, "").strip():
        return listen
    # grpc binds with SO_REUSEPORT: a port another program listens on would
    # "work" and split the callers between the two, so look first.
    if default_stack and not port_taken("127.0.0.1", DEFAULT_ROUTER_PORT):
        return f"127.0.0.1:{DEFAULT_ROUTER_PORT}"
    return "127.0.0.1:0"


@contextlib.asynccontextmanager
async def stack_router(
    listen: str, store_url: str, agent_id: str, ca_dir: Path, speed: float
) -> AsyncIterator[str]:
    """Run the router on `listen` for `agent_id`'s members in `store_url`,
    dialling them with `ca_dir`'s router certificate; yields its host:port.
    Raises `CliError` when it cannot listen."""
    from router.__main__ import at_speed, tls_connect
    from router.config import RouterConfig
    from router.engine import Router
    from router.server import serve
    from router.store_sync import StoreMembership

    try:
        config = at_speed(RouterConfig.from_env(), speed)
    except ValueError as exc:
        raise CliError(f"the router: {exc}") from None
    # Makes the CA (and the router's client certificate) now, before the
    # worker's first create wants it.
    connect = await asyncio.to_thread(tls_connect, ca_dir)
    # The simulated machines prove on the simulator's clock: the witness
    # reports on it too, as the old path's provers did (router/engine.py).
    router = Router(config, connect, report_speed=speed)
    ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_ready(port: int) -> None:
        if not ready.done():
            ready.set_result(port)

    task = asyncio.create_task(
        serve(listen, router, StoreMembership(store_url, agent_id), on_ready=on_ready),
        name="router",
    )
    try:
        waiting: set[asyncio.Future[Any]] = {task, ready}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done() or not ready.result():
            failed = task.exception() if task.done() else None
            raise CliError(f"the router could not listen on {listen}: {failed!r}")
        yield f"{listen.rsplit(':', 1)[0]}:{ready.result()}"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def curio_demand(sim_demand: DemandConfig | None) -> DemandConfig:
    """The stand-in's arrivals: `--sim-demand`'s curve (the simulator's
    ``/demand`` then shows the same), else a flat `DEFAULT_CURIO_RATE`."""
    from simulator import DemandConfig

    if sim_demand is not None:
        return sim_demand
    return DemandConfig(curve=((0.0, DEFAULT_CURIO_RATE),))


def curio_line(summary: CurioSummary, in_flight: int) -> str:
    """The stand-in's summary as one log line (times in Curio seconds)."""
    p50 = summary.latency_p50_s
    latency = "" if p50 is None else f", p50 {p50 * summary.speed:.0f} s"
    failures = ", ".join(f"{k} {v}" for k, v in sorted(summary.failures.items()))
    return (
        f"curio: {summary.arrived} proofs arrived, {summary.done} done "
        f"({summary.done_on_time} on time{latency}), {in_flight} open, "
        f"{summary.dropped} dropped, {summary.retries} retries"
        + (f" ({failures})" if failures else "")
    )


@contextlib.asynccontextmanager
async def stack_curio(
    router: str,
    demand: DemandConfig,
    *,
    speed: float,
    seed: int,
    out: Callable[[str], None],
    every_s: float = SUMMARY_EVERY_S,
) -> AsyncIterator[CurioStandIn]:
    """Run the Curio stand-in against `router` while the context is open,
    sending `demand`'s arrivals and calling `out` with a summary line every
    `every_s` seconds."""
    from simulator.curio.node import CurioConfig, CurioStandIn

    config = CurioConfig(
        cuzk=router, input_bytes=int(CURIO_INPUT_MB * 1_000_000), speed=speed, seed=seed
    )
    node = CurioStandIn(config)
    node.start()
    tasks = [
        asyncio.create_task(_arrivals(node, demand, speed, seed), name="curio-arrivals"),
        asyncio.create_task(_summaries(node, out, every_s), name="curio-summary"),
    ]
    try:
        yield node
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await node.close()


async def _arrivals(node: CurioStandIn, demand: DemandConfig, speed: float, seed: int) -> None:
    """Submit each arrival of `demand`, minute by minute, on a Curio clock
    that starts at the current UTC time and runs `speed` times real time."""
    start, origin = time.time(), time.monotonic()

    def now() -> float:
        return start + (time.monotonic() - origin) * speed

    minute = math.floor(now() / 60)
    while True:
        for at in demand.arrivals(minute, seed):
            if at < start:  # the first minute's, before the stand-in started
                continue
            delay = (at - now()) / speed
            if delay > 0:
                await asyncio.sleep(delay)
            node.submit()
        minute += 1
        await asyncio.sleep(max(0.0, (minute * 60 - now()) / speed))


async def _summaries(node: CurioStandIn, out: Callable[[str], None], every_s: float) -> None:
    while True:
        await asyncio.sleep(every_s)
        summary = node.summary()
        out(curio_line(summary, summary.arrived - summary.done - summary.dropped))
