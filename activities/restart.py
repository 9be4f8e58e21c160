"""The watchdog's activities: start an agent that is not running, keep its
config, and tell a fresh execution what came before it.

`ensure_agent` runs in `AgentWatchdogWorkflow`, which the agent's Temporal
Schedule starts every few minutes (starter/watchdog_schedule.py). The other two run
in the agent workflow itself. Each is idempotent: a retry writes the same
row, starts nothing twice (the ID-conflict policy "use existing"), reads the
same history.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError

from fleet_agent.models import (
    WATCHDOG,
    AgentInput,
    AgentRecall,
    PreviousEnd,
    RecallRequest,
    SaveConfigRequest,
    WatchdogInput,
)
from fleet_agent.store import AgentConfigs, Store

__all__ = ["AGENT_WORKFLOW", "WatchdogActivities", "previous_end"]

log = logging.getLogger("fleet_agent.watchdog")

#: The agent workflow's type (by name: activities never import workflows).
AGENT_WORKFLOW = "FleetAgentWorkflow"
# Ended executions of one agent, newest first; a continue-as-new is no end.
_ENDED_QUERY = (
    'WorkflowId = "{agent_id}" AND ExecutionStatus != "Running" '
    'AND ExecutionStatus != "ContinuedAsNew"'
)
_LISTED = 20


class WatchdogActivities:
    """Store-backed (the config) and client-backed (Temporal) activities."""

    def __init__(self, store: Store) -> None:
        self._configs = AgentConfigs(store)

    @activity.defn
    async def ensure_agent(self, req: WatchdogInput) -> str:
        """Start the agent workflow on its task queue unless it is running (the
        ID-conflict policy "use existing": a running agent is untouched).
        Touches Temporal through the worker's client. Returns the run ID of
        the agent's execution, started now or found running."""
        handle = await activity.client().start_workflow(
            AGENT_WORKFLOW,
            AgentInput(started_by=WATCHDOG),
            id=req.agent_id,
            task_queue=req.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        return handle.result_run_id or ""

    @activity.defn
    async def save_agent_config(self, req: SaveConfigRequest) -> None:
        """Keep the agent's config as its last known one (store, `fa_agent_configs`)."""
        await asyncio.to_thread(
            self._configs.save, req.agent_id, req.config, activity.info().started_time
        )

    @activity.defn
    async def recall_agent(self, req: RecallRequest) -> AgentRecall:
        """For a fresh execution: the agent's last known config (store) and how
        its previous execution ended (Temporal visibility and the last event of
        that execution's history, through the worker's client)."""
        config = await asyncio.to_thread(self._configs.load, req.agent_id)
        try:
            previous = await previous_end(activity.client(), req.agent_id, req.run_id)
        except RPCError as exc:
            # Visibility this worker may not list (or a server without it, as
            # the time-skipping test server): the agent starts all the same,
            # without the fact. A store error above is retried instead.
            log.warning("how agent %r ended before is unknown: %s", req.agent_id, exc.message)
            previous = None
        return AgentRecall(config=config, previous=previous)


async def previous_end(client: Client, agent_id: str, run_id: str) -> PreviousEnd | None:
    """The newest ended execution of `agent_id` other than `run_id`, with the
    reason and identity its closing event records; None if there is none.
    Visibility may lag the end by a second or so (Elasticsearch): a start
    right after a terminate can miss it; the watchdog's, minutes later, not."""
    newest = None
    query = _ENDED_QUERY.format(agent_id=agent_id.replace('"', ""))
    async for wf in client.list_workflows(query, limit=_LISTED):
        if wf.run_id == run_id or wf.close_time is None:
            continue
        if newest is None or wf.close_time > newest.close_time:  # type: ignore[operator]
            newest = wf
    if newest is None:
        return None
    status = newest.status or WorkflowExecutionStatus.TERMINATED
    end = PreviousEnd(run_id=newest.run_id, status=status.name.lower(), ended_at=newest.close_time)
    reason, by = await _closing_event(client, agent_id, newest.run_id)
    return end.model_copy(update={"reason": reason, "by": by})


async def _closing_event(client: Client, agent_id: str, run_id: str) -> tuple[str, str]:
    """(reason, identity) from the last event of one execution's history."""
    response = await client.workflow_service.get_workflow_execution_history_reverse(
        GetWorkflowExecutionHistoryReverseRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=agent_id, run_id=run_id),
            maximum_page_size=1,
        )
    )
    if not response.history.events:
        return "", ""
    event = response.history.events[0]
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
        attrs = event.workflow_execution_terminated_event_attributes
        return attrs.reason, attrs.identity
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
        return event.workflow_execution_failed_event_attributes.failure.message, ""
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
        return "the execution timed out", ""
    return "", ""
