"""The local stack's demand (`fleet-agent up --sim-demand CURVE`, `make run SIM_DEMAND=…`).

Touches: the curve (a `DemandConfig`), and the worker's FLEET_DEMAND_*
variables, exported while the stack runs and restored afterwards (as
starter/stack/sim.py does VAST_API_*). The curve drives the clients of the
simulator's Snark Market, and the worker's `curio` source reads its Curio
node (starter/stack/market.py exports those); in router mode it drives
the Curio stand-in that sends the router proofs, and FLEET_DEMAND_SOURCE=
router alone has the worker read the router's queue from the store
(starter/stack/router.py). `demand_env` with a URL still exports the
`http` source for the simulator's ``GET /demand``. A demand source the
operator named (environment or .env) wins: nothing is exported then, and
the banner says so. A worker added with `--add-worker` gets the same
variables from the stack file.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from fleet_agent.demand.settings import DemandEnv
from starter.agent_client import CliError, UsageError
from starter.stack.exported_env import exported_env

if TYPE_CHECKING:
    from simulator import DemandConfig

__all__ = [
    "DEFAULT_BURSTS_PER_DAY",
    "DEFAULT_CURVE",
    "DemandWiring",
    "demand_env",
    "demand_lines",
    "operator_source",
    "stack_demand",
    "suggested_max_target",
]

#: `--sim-demand default`: a day for a small local fleet (a few simulated
#: machines of 25-100 proofs/h each): quiet at night, a peak of 300 proofs/h
#: at 14:00 UTC (sim clock), two random bursts a day, the simulator's
#: 30-minute deadlines (the Snark Market's clients: requests/hour, its own
#: 45-minute deadline).
DEFAULT_CURVE = "0:60,8:150,14:300,20:100"
DEFAULT_BURSTS_PER_DAY = 2.0
SOURCE_ENV = "FLEET_DEMAND_SOURCE"
URL_ENV = "FLEET_DEMAND_URL"
METRICS_URL_ENV = "FLEET_DEMAND_METRICS_URL"


def stack_demand(raw: str | None) -> DemandConfig | None:
    """`--sim-demand`'s value as the simulator's settings (None: not given).
    Raises `UsageError` for a bad curve, `CliError` without the simulator."""
    if raw is None:
        return None
    if os.environ.get("VAST_API_KEY"):
        raise CliError(
            "--sim-demand serves demand from the simulator, which runs only without "
            "VAST_API_KEY: unset it, or point the worker at your own FLEET_DEMAND_SOURCE"
        )
    try:
        from simulator import demand_from_options
    except ImportError as exc:
        raise CliError(f"--sim-demand needs the vast.ai simulator (simulator): {exc}") from None
    try:
        if raw.strip() == "default":
            config = demand_from_options(DEFAULT_CURVE, burst_rate_per_day=DEFAULT_BURSTS_PER_DAY)
        else:
            config = demand_from_options(raw)
    except ValueError as exc:
        raise UsageError(f"--sim-demand: {exc}") from None
    assert config is not None  # a curve was given
    return config


def suggested_max_target(config: DemandConfig) -> int:
    """The `max_target` the banner proposes: twice the curve's peak (room for
    a burst and the headroom), in steps of 50 proofs/h."""
    peak = max(rate for _, rate in config.curve)
    return max(50, math.ceil(2 * peak / 50) * 50)


@dataclass(frozen=True)
class DemandWiring:
    """Where the stack's demand is (None: the router's queue), and whether
    the worker was pointed at it."""

    url: str | None
    #: False: the operator's own FLEET_DEMAND_SOURCE wins, nothing was exported.
    exported: bool
    #: What serves it: the simulator's ``/demand`` (http), the router's
    #: queue, or the Snark Market's Curio node (curio).
    source: Literal["http", "router", "curio"] = "http"
    #: The Snark Market's variables were exported too (starter/stack/market.py).
    market: bool = False


def operator_source() -> bool:
    """Whether FLEET_DEMAND_SOURCE is set, in the environment or the .env file
    (a bad value is reported by the settings, read before this)."""
    try:
        return "source" in DemandEnv.read().model_fields_set
    except ValueError:
        return True


@contextlib.contextmanager
def demand_env(url: str | None) -> Iterator[DemandWiring]:
    """Export FLEET_DEMAND_SOURCE=http and FLEET_DEMAND_URL=`url` (the
    simulator's ``/demand``) for the worker, or with `url` None
    FLEET_DEMAND_SOURCE=router (the router's queue, in the store), unless
    the operator named a source; restore them afterwards."""
    source: Literal["http", "router"] = "router" if url is None else "http"
    if operator_source():
        yield DemandWiring(url, exported=False, source=source)
        return
    values = {SOURCE_ENV: "router"} if url is None else {SOURCE_ENV: "http", URL_ENV: url}
    with exported_env(values):
        yield DemandWiring(url, exported=True, source=source)


def demand_lines(
    wiring: DemandWiring | None, reads: DemandEnv, config: DemandConfig | None
) -> tuple[str | None, str | None]:
    """The banner's demand line (where the worker reads demand), and the
    `fleet-agent config` arguments that switch the agent to demand mode
    when the worker reads the simulator's. (None, None) when it reads none."""
    if wiring is not None and wiring.exported and config is not None:
        if wiring.url is None:
            where = f"the router's queue, in the store ({SOURCE_ENV}=router exported)"
        elif wiring.source == "curio":
            where = (
                f"the Snark Market's Curio node at {wiring.url} "
                f"({SOURCE_ENV}=curio, {URL_ENV}, {METRICS_URL_ENV} exported)"
            )
        else:
            where = f"simulator at {wiring.url} ({SOURCE_ENV}=http, {URL_ENV} exported)"
        line = f"  demand:     {where}"
        return line, f"--set target_mode=demand --set max_target={suggested_max_target(config)}"
    if reads.source == "none":
        return None, None
    where = f"{reads.source} at {reads.url}" if reads.url else f"{reads.source}"
    if wiring is not None:
        ours = "the router's queue" if wiring.url is None else f"the simulator's {wiring.url}"
        if wiring.source == "curio":
            ours = f"the Snark Market's Curio node at {wiring.url}"
        where += f" (your {SOURCE_ENV} wins; {ours} is not read)"
    switch = "`fleet-agent config --set target_mode=demand --set max_target=...`"
    return f"  demand:     {where}; demand mode: {switch}", None
