"""The vast.ai simulator of the local stack, run in-process (no VAST_API_KEY set).

The worker finds it through VAST_API_URL/VAST_API_KEY, exported while the
stack runs and restored afterwards, with FLEET_PROVER_ALLOW_LOOPBACK=1: the
simulated machines listen on loopback, which a worker refuses to reach
otherwise (fleet_agent/fleet/prover_status.py). FLEET_PROVER_MODE is
`router` unless the operator set it or `--sim-demand` is given: the
machines run cuzk behind their TLS front (docs/SIMULATOR.md, "Router
mode"), their credentials signed by the stack's own CA (FLEET_ROUTER_CA_DIR,
unless set), and the stack runs the router (starter/stack/router.py). With
FLEET_PROVER_MODE=curio_on_host the machines serve the sidecar's status
(the old path) and need the simulated prover's 60 GiB
(FLEET_PROVER_MIN_RAM_GIB, unless set). `--sim-demand` off router mode
(its default) runs the Snark Market, its node proving on the machines the
agent rents (starter/stack/market.py); in router mode the curve drives the
router's Curio stand-in instead (starter/stack/demand.py). A worker added
to a running stack (`up --add-worker`) uses that stack's simulator, and its
prover mode, instead of starting one.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from starter.agent_client import CliError
from starter.stack.exported_env import exported_env

if TYPE_CHECKING:
    from starter.stack.options import StackOptions

__all__ = [
    "CA_DIR_ENV",
    "StackSim",
    "prover_mode",
    "routed",
    "shared_simulator",
    "simulator",
]

#: The worker's CA directory (fleet_agent/config/settings.py).
CA_DIR_ENV = "FLEET_ROUTER_CA_DIR"


@dataclass(frozen=True)
class StackSim:
    """The stack's simulator: its origin, and its Curio stand-in's when it
    runs the Snark Market (None: it does not)."""

    url: str
    curio_url: str | None = None


def routed() -> bool:
    """Whether the worker runs router mode (FLEET_PROVER_MODE as exported here)."""
    from fleet_agent.fleet.prover import MODE_ENV

    return os.environ.get(MODE_ENV) == "router"


def prover_mode(market: bool) -> str:
    """The machines' prover mode: the operator's FLEET_PROVER_MODE, else
    `curio_on_host` for the Snark Market stack (its node proves on the
    machines' own provers, whose status reports its work), else `router`."""
    from fleet_agent.fleet.prover import MODE_ENV

    return os.environ.get(MODE_ENV) or ("curio_on_host" if market else "router")


@contextlib.contextmanager
def simulator(
    opts: StackOptions, state_path: str | None, ca_dir: Path
) -> Iterator[StackSim | None]:
    """Run the vast.ai simulator in-process unless a real key is configured.

    Yields the simulator, or None when a real vast.ai account is used or the
    simulator is not installed. VAST_API_URL/VAST_API_KEY are exported for
    the worker's settings and restored afterwards. The market is kept in
    `state_path` (None: nothing kept); router mode's CA is in `ca_dir`.
    With `--sim-demand` off router mode it runs the Snark Market with its
    node set up (starter/stack/market.py).
    """
    if os.environ.get("VAST_API_KEY"):
        yield None
        return
    try:
        from simulator import SimServer, StateError
    except ImportError:
        print("vast.ai simulator not available (simulator): running without a fleet")
        yield None
        return
    mode = prover_mode(opts.sim_demand is not None)
    market = None
    if opts.sim_demand is not None and mode != "router":
        from starter.stack.market import market_config

        market = market_config(opts.sim_demand)
    try:
        server = SimServer(
            seed=opts.sim_seed,
            speed=opts.sim_speed,
            scenario=opts.sim_scenario,
            rate_limits=opts.sim_rate_limits,
            start_epoch=opts.sim_start,
            state_path=state_path,
            # The Snark Market's node is the machines' work: no /demand queue then.
            demand=None if market is not None else opts.sim_demand,
            snark_market=market,
        )
    except StateError as exc:
        raise CliError(f"{exc}; remove the file to start a fresh simulated market") from None
    with server as sim, _vast_env(sim.url, ca_dir, mode):
        if market is None:
            yield StackSim(sim.url)
            return
        from starter.stack.market import set_up_node

        set_up_node(sim)
        yield StackSim(sim.url, sim.curio_url)


@contextlib.contextmanager
def shared_simulator(url: str | None, ca_dir: Path, *, market: bool) -> Iterator[str | None]:
    """The running stack's simulator, for a worker added to it (`--add-worker`);
    `market`: that stack runs the Snark Market (its prover mode, then)."""
    if url is None or os.environ.get("VAST_API_KEY"):
        yield None
        return
    with _vast_env(url, ca_dir, prover_mode(market)):
        yield url


@contextlib.contextmanager
def _vast_env(url: str, ca_dir: Path, mode: str) -> Iterator[None]:
    """Export the simulator's VAST_API_URL, (public, test-only) key,
    loopback switch (its machines listen on 127.0.0.1) and prover `mode`
    (`prover_mode`), then restore."""
    from fleet_agent.fleet.prover import LOOPBACK_ENV, MIN_RAM_ENV, MODE_ENV
    from simulator import DEFAULT_API_KEY

    values = {"VAST_API_URL": url, "VAST_API_KEY": DEFAULT_API_KEY, LOOPBACK_ENV: "1"}
    # Router mode unless the operator chose a mode (or the stack runs the
    # Snark Market): the worker's default, and the simulated machines run
    # cuzk behind the TLS front for it.
    values[MODE_ENV] = mode
    if mode == "router":
        # The stack's own CA, kept with its other files; the RAM floor stays
        # cuzk's (ProverSpec's default): the simulated image refuses less.
        values[CA_DIR_ENV] = os.environ.get(CA_DIR_ENV) or str(ca_dir)
    elif not os.environ.get(MIN_RAM_ENV):
        # The old path's simulated prover does one proof per 60 GiB
        # (simulator/prover.py), not cuzk's 128 GiB.
        values[MIN_RAM_ENV] = "60"
    with exported_env(values):
        yield
