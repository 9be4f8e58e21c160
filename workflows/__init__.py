"""Temporal workflows of fleet-agent: the agent loop, one run, the fleet
monitor, and the watchdog that starts an agent that is not running.

The three classes are imported on first use (PEP 562), not here: the
workflow sandbox executes this package's `__init__` afresh for every new
workflow, so an eager import of all three made each run (a new workflow per
message) re-execute the agent's and the monitor's modules too: 5 % of the
worker's CPU at 100 agents (docs/decisions/load-time.md, "Many fleets on one worker").
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workflows.agent import FleetAgentWorkflow
    from workflows.monitor import FleetMonitorWorkflow
    from workflows.run import AgentRunWorkflow
    from workflows.watchdog_look import AgentWatchdogWorkflow

__all__ = [
    "AgentRunWorkflow",
    "AgentWatchdogWorkflow",
    "FleetAgentWorkflow",
    "FleetMonitorWorkflow",
]

_HOMES = {
    "AgentRunWorkflow": "workflows.run",
    "AgentWatchdogWorkflow": "workflows.watchdog_look",
    "FleetAgentWorkflow": "workflows.agent",
    "FleetMonitorWorkflow": "workflows.monitor",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'workflows' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
