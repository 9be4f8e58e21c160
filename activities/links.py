"""Activities that reach other workflows through the worker's Temporal client.

A workflow cannot query another workflow, wait for a workflow it did not
start in this execution, or learn whether another workflow still runs; these
activities do it for them, with `activity.client()`.
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from activities.heartbeat import heartbeating
from fleet_agent.models import InboxItem, RunResult, RunStatus, StoreMessagesRequest, WaitForRun
from fleet_agent.store import Store

__all__ = ["UNSTORED_MESSAGES_QUERY", "LinkActivities"]

# The agent workflow's query that hands out message texts not yet stored.
UNSTORED_MESSAGES_QUERY = "unstored_messages"


class LinkActivities:
    """Holds the store; the Temporal client is the worker's own."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn
    async def store_operator_messages(self, req: StoreMessagesRequest) -> list[str]:
        """Read the operator message texts not yet stored from the agent
        workflow (a query, so the texts cross history only once, in their
        signal) and write them to the store. Returns the keys now stored."""
        handle = activity.client().get_workflow_handle(req.agent_id)
        async with heartbeating():
            items: list[InboxItem] = await handle.query(
                UNSTORED_MESSAGES_QUERY, result_type=list[InboxItem]
            )
            await asyncio.to_thread(self._store.stash_messages, req.agent_id, items)
        return [item.key for item in items]

    @activity.defn
    async def wait_for_run(self, req: WaitForRun) -> RunResult:
        """Wait (heartbeating) for a run workflow an earlier execution of the
        agent started, and return its result; a run that failed, timed out or
        was terminated comes back as a failed RunResult."""
        handle = activity.client().get_workflow_handle(
            req.workflow_id, run_id=req.run_id or None, result_type=RunResult
        )
        async with heartbeating():
            try:
                result: RunResult = await handle.result(follow_runs=False)
                return result
            except WorkflowFailureError as exc:
                cause = exc.cause or exc
                return RunResult(
                    run=req.run,
                    status=RunStatus.FAILED,
                    error=f"run workflow did not complete: {cause}",
                    started_at=req.started_at,
                )

    @activity.defn
    async def agent_is_open(self, agent_id: str) -> bool:
        """Whether the agent workflow (its newest execution) is still running."""
        try:
            described = await activity.client().get_workflow_handle(agent_id).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return described.status == WorkflowExecutionStatus.RUNNING
