"""The vast.ai simulator of the local stack, run in-process (no VAST_API_KEY set).

The worker finds it through VAST_API_URL/VAST_API_KEY, exported while the
stack runs and restored afterwards, with FLEET_PROVER_ALLOW_LOOPBACK=1: the
simulated provers listen on loopback, which a worker refuses to read
otherwise (fleet_agent/fleet/prover_status.py), and
FLEET_PROVER_MODE=curio_on_host (unless set): they serve the sidecar's
status, the old path's contract. A worker added to a running stack
(`up --add-worker`) uses that stack's simulator instead of starting one.
With `--sim-demand` the simulator serves demand too (starter/stack_demand.py).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from starter.agent_client import CliError

if TYPE_CHECKING:
    from starter.stack_options import StackOptions

__all__ = ["exported_env", "shared_simulator", "simulator"]


@contextlib.contextmanager
def simulator(opts: StackOptions, state_path: str | None) -> Iterator[str | None]:
    """Run the vast.ai simulator in-process unless a real key is configured.

    Yields the simulator URL, or None when a real vast.ai account is used or
    the simulator is not installed. VAST_API_URL/VAST_API_KEY are exported for
    the worker's settings and restored afterwards. The market is kept in
    `state_path` (None: nothing kept).
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
    with server as sim, _vast_env(sim.url):
        yield sim.url


@contextlib.contextmanager
def shared_simulator(url: str | None) -> Iterator[str | None]:
    """The running stack's simulator, for a worker added to it (`--add-worker`)."""
    if url is None or os.environ.get("VAST_API_KEY"):
        yield None
        return
    with _vast_env(url):
        yield url


@contextlib.contextmanager
def _vast_env(url: str) -> Iterator[None]:
    """Export the simulator's VAST_API_URL, (public, test-only) key and
    loopback switch (its provers listen on 127.0.0.1), then restore."""
    from fleet_agent.fleet.prover import LOOPBACK_ENV, MIN_RAM_ENV, MODE_ENV
    from simulator import DEFAULT_API_KEY

    values = {"VAST_API_URL": url, "VAST_API_KEY": DEFAULT_API_KEY, LOOPBACK_ENV: "1"}
    # The simulated provers serve the sidecar's status (the old path's
    # contract), unless the operator chose a mode.
    values[MODE_ENV] = os.environ.get(MODE_ENV) or "curio_on_host"
    # ...and need what the simulated prover does (one proof per 60 GiB:
    # simulator/prover.py), not cuzk's 128 GiB, over which the simulated
    # market lists few hosts.
    values[MIN_RAM_ENV] = os.environ.get(MIN_RAM_ENV) or "60"
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
