"""The options of `fleet-agent up`, and the dev server settings and files they give.

Light on imports on purpose: `up` checks its ports with these before it loads
the worker (activities, LLM providers), which takes seconds on a busy machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from fleet_agent.env.local_stack import (
    StackPaths,
    stack_paths,
)
from starter.stack.devserver import ROOT, DevServerConfig, load_dev_config

if TYPE_CHECKING:
    from simulator import DemandConfig

__all__ = ["StackOptions", "dev_config", "sim_start_epoch"]


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
    #: (fleet_agent.env.local_stack.py).
    sim_state: str | None = None
    #: Keep no simulator state at all.
    sim_no_state: bool = False
    sim_rate_limits: bool = True
    #: The simulated clock's start (epoch seconds; `--sim-start`); None: now.
    sim_start: float | None = None
    #: The simulator's demand (`--sim-demand`; starter/stack/demand.py): the
    #: worker then reads it. None: no demand served.
    sim_demand: DemandConfig | None = None
    new_store: bool = False
    #: The web console's port, for the console (None: CONSOLE_PORT, else 8080).
    console_port: int | None = None
    #: With a stack already running on the port: add a worker to it (and
    #: nothing else) instead of attaching.
    add_worker: bool = False


_HH_MM = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")


def sim_start_epoch(text: str, now: datetime) -> float:
    """`--sim-start`: a UTC time of day ``HH:MM`` (the next one after `now`)
    or a date and time (``2099-01-15T08:00Z``, after `now`), in epoch seconds.

    Always ahead of the wall clock: the worker ages the node's rows on its own
    clock (activities/market.py), so a simulated past would read every open
    row as late. ValueError for anything else."""
    text = text.strip()
    found = _HH_MM.fullmatch(text)
    if found is not None:
        day = now.astimezone(UTC).replace(second=0, microsecond=0)
        at = day.replace(hour=int(found.group(1)), minute=int(found.group(2)))
        return (at if at > now else at + timedelta(days=1)).timestamp()
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--sim-start: {text[:40]!r} is neither a UTC time of day HH:MM "
            "nor a date and time such as 2099-01-15T08:00Z"
        ) from None
    at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    if at <= now or at.year > 9000:
        raise ValueError(f"--sim-start: {text[:40]} is not after now and before the year 9000")
    return at.timestamp()


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
