"""`fleet-agent up`'s entry: its options over their environment variables, the
port check, then the stack (starter/stack/up.py).

Light on imports on purpose: `up` checks its ports before it loads the worker
(activities, LLM providers), which takes seconds on a busy machine; the stack
itself is imported only then.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from datetime import UTC, datetime

from fleet_agent.env.local_stack import (
    CONSOLE_PORT_ENV,
    DEFAULT_CONSOLE_PORT,
    TEMPORAL_PORT_ENV,
    TEMPORAL_UI_PORT_ENV,
    env_port,
)
from starter.agent_client import CliError, UsageError
from starter.stack.guard import port_taken
from starter.stack.options import StackOptions, dev_config, sim_start_epoch
from starter.stack.temporal_server import check_ports

__all__ = ["up_main"]


def _now() -> datetime:
    return datetime.now(UTC)


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
        sim_start = None if args.sim_start is None else sim_start_epoch(args.sim_start, _now())
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
        sim_start=sim_start,
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
