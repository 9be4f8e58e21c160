"""Activities that reach other workflows through the worker's Temporal client.

A workflow cannot query another workflow, wait for a workflow it did not
start in this execution, or learn whether another workflow still runs; these
activities do it for them, with `activity.client()`.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from activities.heartbeat import heartbeating
from fleet_agent.models import InboxItem, RunResult, RunStatus, StoreMessagesRequest, WaitForRun
from fleet_agent.store import Store

__all__ = [
    "UNSTORED_MESSAGES_QUERY",
    "TemporalActivities",
    "agent_open_or_unknown",
    "agent_running",
    "stash_unstored_messages",
]

# The agent workflow's query that hands out message texts not yet stored.
UNSTORED_MESSAGES_QUERY = "unstored_messages"

# The poll's own look at the agent: short, the poll does not wait for it.
_DESCRIBE_TIMEOUT = timedelta(seconds=5)

_log = logging.getLogger(__name__)


async def stash_unstored_messages(store: Store, agent_id: str) -> list[str]:
    """The one path of an operator message's text to the store: the agent's
    `unstored_messages` query (so the text crosses history once, in its
    signal), written to the store's inbox under its key (a second write of
    a key is a no-op). Called by whichever activity needs the texts first:
    the agent's store loop (`store_operator_messages`) or the run's
    `load_context` (activities/runlog.py). Returns the keys written; needs
    the running activity's client."""
    handle = activity.client().get_workflow_handle(agent_id)
    items: list[InboxItem] = await handle.query(
        UNSTORED_MESSAGES_QUERY, result_type=list[InboxItem]
    )
    await asyncio.to_thread(store.inbox.stash_messages, agent_id, items)
    return [item.key for item in items]


async def agent_running(agent_id: str, *, rpc_timeout: timedelta | None = None) -> bool:
    """Whether the agent workflow (its newest execution) is still running, as
    the running activity's client (`activity.client()`) describes it; an agent
    Temporal does not know is not. Other failures raise."""
    try:
        handle = activity.client().get_workflow_handle(agent_id)
        described = await handle.describe(rpc_timeout=rpc_timeout)
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return described.status == WorkflowExecutionStatus.RUNNING


async def agent_open_or_unknown(agent_id: str) -> bool | None:
    """`agent_running`, or None when Temporal could not say (no client, an
    RPC failure, a timeout): for a caller that must not fail because of it."""
    try:
        return await agent_running(agent_id, rpc_timeout=_DESCRIBE_TIMEOUT)
    except Exception as exc:
        _log.warning("could not describe agent %s: %s: %s", agent_id, type(exc).__name__, exc)
        return None


class TemporalActivities:
    """Holds the store; the Temporal client is the worker's own."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn
    async def store_operator_messages(self, req: StoreMessagesRequest) -> list[str]:
        """Read the operator message texts not yet stored from the agent
        workflow (a query, so the texts cross history only once, in their
        signal) and write them to the store. Returns the keys now stored."""
        async with heartbeating():
            return await stash_unstored_messages(self._store, req.agent_id)

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
        """Whether the agent workflow (its newest execution) is still running.
        New monitors get this answer from `poll_fleet` (`FleetSnapshot.agent_open`)
        and call this only after a failed poll or a failed signal."""
        return await agent_running(agent_id)
