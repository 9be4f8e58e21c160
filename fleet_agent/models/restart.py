"""The watchdog's payloads: an agent that comes back after it was ended.

A Temporal Schedule (starter/watchdog_schedule.py) starts `AgentWatchdogWorkflow`
every few minutes; it starts the agent workflow unless it is running. A fresh
agent execution then recalls what the store and Temporal know: its last
config and how its previous execution ended (`AgentRecall`), and keeps that
as an `AgentRestarted` fact, shown in `status` and the Web UI.
"""

from __future__ import annotations

from datetime import datetime

from fleet_agent.wire import Wire

from .config import AgentConfig

__all__ = [
    "WATCHDOG",
    "AgentRecall",
    "AgentRestarted",
    "PreviousEnd",
    "RecallRequest",
    "SaveConfigRequest",
    "WatchdogInput",
]

#: `AgentInput.started_by` of a start by the watchdog's schedule.
WATCHDOG = "watchdog"


class WatchdogInput(Wire):
    """Input of `AgentWatchdogWorkflow` and of its `ensure_agent` activity."""

    agent_id: str
    task_queue: str


class SaveConfigRequest(Wire):
    """The agent's config, to keep as its last known one (`save_agent_config`)."""

    agent_id: str
    config: AgentConfig


class RecallRequest(Wire):
    """A fresh execution asks what came before it (`recall_agent`)."""

    agent_id: str
    run_id: str


class PreviousEnd(Wire):
    """How the agent's previous execution ended, as Temporal recorded it."""

    run_id: str
    status: str  # "terminated", "failed", "timed_out", "canceled", "completed"
    ended_at: datetime | None = None
    reason: str = ""  # the terminate reason, the failure message
    by: str = ""  # the identity that terminated or cancelled it, when recorded


class AgentRecall(Wire):
    """What a fresh execution finds: its last known config (None: never
    kept) and how the previous execution ended (None: there was none)."""

    config: AgentConfig | None = None
    previous: PreviousEnd | None = None


class AgentRestarted(Wire):
    """The agent came back after its previous execution ended: kept in its
    state, shown in `status` and the Web UI, announced once."""

    at: datetime
    started_by: str  # WATCHDOG, or "start" (an operator's start, a message)
    previous: PreviousEnd
    config_restored: bool = False

    def text(self) -> str:
        """`restarted by the watchdog; it had ended: terminated (reason …) by … at …`."""
        who = "the watchdog" if self.started_by == WATCHDOG else "a start request"
        line = f"restarted by {who}; it had ended: {self.how_ended()}"
        if self.config_restored:
            line += "; last known config restored from the store"
        return line

    def how_ended(self) -> str:
        """`terminated (reason: …) by … at …`: the previous execution's end."""
        p = self.previous
        line = p.status
        if p.reason:
            line += f" (reason: {p.reason[:200]})"
        if p.by:
            line += f" by {p.by[:80]}"
        if p.ended_at is not None:
            line += f" at {p.ended_at.strftime('%Y-%m-%d %H:%M:%S')} UTC"
        return line
