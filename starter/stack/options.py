"""The options of `fleet-agent up`, the dev server settings and files they give,
and the command's entry point.

Light on imports on purpose: `up` checks its ports with these before it loads
the worker (activities, LLM providers), which takes seconds on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleet_agent.config.local_stack import (
    CONSOLE_PORT_ENV,
    DEFAULT_CONSOLE_PORT,
    TEMPORAL_PORT_ENV,
    TEMPORAL_UI_PORT_ENV,
    StackPaths,
    env_port,
    stack_paths,
)
from starter.agent_client import CliError, UsageError
from starter.stack.devserver import ROOT, DevServerConfig, load_dev_config
from starter.stack.guard import port_taken
from starter.stack.temporal_server import check_ports

if TYPE_CHECKING:
    from simulator import DemandConfig

__all__ = ["StackOptions", "dev_config", "up_main"]


@dataclass(frozen=True)
class StackOptions:
    agent_id: str
    task_queue: str
    port: int | None = None
    ui_port: int | None = None
    db_filename: str | None = None
    check: bool = False
    check_timeout: float = 60.0
    sim_seed: int = 0
    sim_speed: float = 1.0
    sim_scenario: str = "realistic"
    #: The simulator's state file (relative to the working directory), so a
    #: restart finds the fleet it left; None: the stack's own
    #: (fleet_agent/config/local_stack.py).
    sim_state: str | None = None
    #: Keep no simulator state at all.
    sim_no_state: bool = False
    sim_rate_limits: bool = True
    #: The simulator's demand (`--sim-demand`; starter/stack/demand.py): the
    #: worker then reads it. None: no demand served.
    sim_demand: DemandConfig | None = None
    new_store: bool = False
    #: The web console's port, for the console (None: CONSOLE_PORT, else 8080).
    console_port: int | None = None
    #: With a stack already running on the port: add a worker to it (and
    #: nothing else) instead of attaching.
    add_worker: bool = False


def dev_config(opts: StackOptions) -> tuple[DevServerConfig, StackPaths]:
    """The dev server's settings and the stack's files, options over temporal-dev.yaml."""
    config = load_dev_config()
    overrides: dict[str, Any] = {}
    if opts.port is not None:
        overrides["port"] = opts.port
    if opts.ui_port is not None:
        overrides["ui_port"] = opts.ui_port
    port = overrides.get("port", config.port)
    paths = stack_paths(
        port,
        db_filename=opts.db_filename,
        default_port=config.port,
        default_db=config.db_filename,
        db_base=ROOT,
    )
    # Another port without a named database: the stack's own Temporal database,
    # so it shares nothing with the default stack.
    overrides["db_filename"] = None if paths.temporal_db is None else str(paths.temporal_db)
    return config.model_copy(update=overrides), paths


def up_main(args: argparse.Namespace) -> int:
    """`fleet-agent up`: options (over their environment variables), the port
    check, then the stack; returns the exit code. Raises `CliError` (`UsageError`
    for a port variable that is not a port)."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:  # an option wins over its environment variable
        port = args.port or env_port(TEMPORAL_PORT_ENV)
        ui_port = args.ui_port or env_port(TEMPORAL_UI_PORT_ENV)
        console_port = args.console_port or env_port(CONSOLE_PORT_ENV) or DEFAULT_CONSOLE_PORT
    except ValueError as exc:  # a malformed setting, as a malformed option: exit 2
        raise UsageError(str(exc)) from None
    sim_demand = None
    if args.sim_demand is not None:
        # Only then: the simulator's import is a tenth of a second more.
        from starter.stack.demand import stack_demand

        sim_demand = stack_demand(args.sim_demand)
    opts = StackOptions(
        agent_id=args.agent_id,
        task_queue=args.task_queue,
        port=port,
        ui_port=ui_port,
        console_port=console_port,
        db_filename=args.db_filename,
        check=args.check,
        check_timeout=args.check_timeout,
        sim_seed=args.sim_seed,
        sim_speed=args.sim_speed,
        sim_scenario=args.sim_scenario,
        sim_state=args.sim_state or None,
        # `--sim-state ''` keeps nothing, as it always has.
        sim_no_state=args.sim_state == "",
        sim_rate_limits=not args.sim_no_rate_limits,
        sim_demand=sim_demand,
        new_store=args.new_store,
        add_worker=args.add_worker,
    )
    # A port held by another program fails now, before the worker's imports
    # (seconds on a busy machine); `up` checks again as it starts the server.
    running = asyncio.run(check_ports(dev_config(opts)[0]))
    console_port = opts.console_port or DEFAULT_CONSOLE_PORT
    if not running and port_taken("127.0.0.1", console_port):
        # No stack here yet, so this `up` would serve the console: say so now.
        raise CliError(
            f"port {console_port} (the console's) is in use by another program: stop it, "
            f"or set {CONSOLE_PORT_ENV}, e.g. `make run {CONSOLE_PORT_ENV}={console_port + 100}`"
        )
    from starter.stack.up import up

    return asyncio.run(up(opts))
