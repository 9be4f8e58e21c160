"""The vast.ai simulator of the local stack, run in-process (no VAST_API_KEY set).

The worker finds it through VAST_API_URL/VAST_API_KEY, exported while the
stack runs and restored afterwards, with FLEET_PROVER_ALLOW_LOOPBACK=1: the
simulated machines listen on loopback, which a worker refuses to reach
otherwise (fleet_agent/fleet/prover_status.py). FLEET_PROVER_MODE is
`router` unless the operator set it: the machines run cuzk behind their TLS
front (docs/SIMULATOR.md, "Router mode"), their credentials signed by the
stack's own CA (FLEET_ROUTER_CA_DIR, unless set), and the stack runs the
router (starter/stack_router.py). With FLEET_PROVER_MODE=curio_on_host the
machines serve the sidecar's status (the old path) and need the simulated
prover's 60 GiB (FLEET_PROVER_MIN_RAM_GIB, unless set). A worker added to a
running stack (`up --add-worker`) uses that stack's simulator instead of
starting one. With `--sim-demand` the simulator serves demand too
(starter/stack_demand.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from starter.agent_client import CliError

if TYPE_CHECKING:
    from starter.stack_options import StackOptions

__all__ = ["CA_DIR_ENV", "exported_env", "routed", "shared_simulator", "simulator"]

#: The worker's CA directory (fleet_agent/config/settings.py).
CA_DIR_ENV = "FLEET_ROUTER_CA_DIR"


def routed() -> bool:
    """Whether the worker runs router mode (FLEET_PROVER_MODE as exported here)."""
    from fleet_agent.fleet.prover import MODE_ENV

    return os.environ.get(MODE_ENV) == "router"


@contextlib.contextmanager
def simulator(opts: StackOptions, state_path: str | None, ca_dir: Path) -> Iterator[str | None]:
    """Run the vast.ai simulator in-process unless a real key is configured.

    Yields the simulator URL, or None when a real vast.ai account is used or
    the simulator is not installed. VAST_API_URL/VAST_API_KEY are exported for
    the worker's settings and restored afterwards. The market is kept in
    `state_path` (None: nothing kept); router mode's CA is in `ca_dir`.
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
    try:
        server = SimServer(
            seed=opts.sim_seed,
            speed=opts.sim_speed,
            scenario=opts.sim_scenario,
            rate_limits=opts.sim_rate_limits,
            state_path=state_path,
            demand=opts.sim_demand,
        )
    except StateError as exc:
        raise CliError(f"{exc}; remove the file to start a fresh simulated market") from None
    with server as sim, _vast_env(sim.url, ca_dir):
        yield sim.url


@contextlib.contextmanager
def shared_simulator(url: str | None, ca_dir: Path) -> Iterator[str | None]:
    """The running stack's simulator, for a worker added to it (`--add-worker`)."""
    if url is None or os.environ.get("VAST_API_KEY"):
        yield None
        return
    with _vast_env(url, ca_dir):
        yield url


@contextlib.contextmanager
def _vast_env(url: str, ca_dir: Path) -> Iterator[None]:
    """Export the simulator's VAST_API_URL, (public, test-only) key,
    loopback switch (its machines listen on 127.0.0.1) and prover mode, then
    restore."""
    from fleet_agent.fleet.prover import LOOPBACK_ENV, MIN_RAM_ENV, MODE_ENV
    from simulator import DEFAULT_API_KEY

    values = {"VAST_API_URL": url, "VAST_API_KEY": DEFAULT_API_KEY, LOOPBACK_ENV: "1"}
    # Router mode unless the operator chose a mode: the worker's default,
    # and the simulated machines run cuzk behind the TLS front for it.
    mode = values[MODE_ENV] = os.environ.get(MODE_ENV) or "router"
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


@contextlib.contextmanager
def exported_env(values: dict[str, str]) -> Iterator[None]:
    """Set `values` in this process's environment (the worker's settings read
    them), then put back exactly those keys as they were: only these, so
    what else the stack sets meanwhile stays."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
