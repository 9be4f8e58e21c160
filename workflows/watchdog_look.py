"""AgentWatchdogWorkflow: one look at an agent, started by its Schedule.

Temporal appends the scheduled time to the ID of every workflow a Schedule
starts, so a Schedule cannot start the agent workflow (ID = agent ID)
itself: it starts this one (ID `fleet-agent-watchdog-<agent>-<time>`), whose
only activity starts the agent with the ID-conflict policy "use existing"
(docs/decisions/hostile-hosts.md, "The watchdog: a Schedule that starts a starter").
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models only.
    from fleet_agent.models import WatchdogInput
    from workflows import stubs

__all__ = ["AgentWatchdogWorkflow"]

# Starting a workflow is one call to the server: a few tries, then this look
# fails visibly (the schedule shows it) and the next one tries again.
_ENSURE_TIMEOUT = timedelta(seconds=30)
_ENSURE_RETRY = RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1))


@workflow.defn
class AgentWatchdogWorkflow:
    """Starts the agent `agent_id` on `task_queue` unless it is running.

    Touches: the agent workflow, through the `ensure_agent` activity (the
    worker's Temporal client). Returns the agent's run ID.
    """

    @workflow.run
    async def run(self, inp: WatchdogInput) -> str:
        return await workflow.execute_activity(
            stubs.ensure_agent,
            inp,
            start_to_close_timeout=_ENSURE_TIMEOUT,
            retry_policy=_ENSURE_RETRY,
            summary=f"start agent {inp.agent_id!r} unless it is running",
        )
