"""The options of `fleet-agent up`, and the dev server settings and files they give.

Light on imports on purpose: `up` checks its ports with these before it loads
the worker (activities, LLM providers), which takes seconds on a busy machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleet_agent.env.local_stack import (
    StackPaths,
    stack_paths,
)
from starter.stack.devserver import ROOT, DevServerConfig, load_dev_config

if TYPE_CHECKING:
    from simulator import DemandConfig

__all__ = ["StackOptions", "dev_config"]


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
