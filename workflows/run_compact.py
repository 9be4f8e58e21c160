"""The run's compaction step: fold what left the history window before round 1.

Called only when `load_context` reports runs outside the window that the
session's summary does not cover yet (`ContextInfo.compaction_due`), so most
runs add nothing to their history. A failure here never fails the run: the
prompt's window already keeps it within budget without those runs, and the
next run folds them.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and the activity declarations.
    from fleet_agent.models import CompactRequest, ContextInfo, RunInput
    from workflows import stubs
    from workflows.policies import COMPACT_HEARTBEAT_TIMEOUT, COMPACT_RETRY, COMPACT_TIMEOUT

__all__ = ["COMPACT_PATCH", "compact_if_due"]

COMPACT_PATCH = "session-summary"
"""Runs recorded before compaction existed replay without the activity."""


async def compact_if_due(inp: RunInput, context: ContextInfo) -> None:
    """Run `compact_session` when the context says runs wait to be folded."""
    if not context.compaction_due or not workflow.patched(COMPACT_PATCH):
        return
    try:
        await workflow.execute_activity(
            stubs.compact_session,
            CompactRequest(
                agent_id=inp.agent_id,
                session=inp.session,
                run=inp.run,
                history_token_budget=inp.config.history_token_budget,
            ),
            start_to_close_timeout=COMPACT_TIMEOUT,
            heartbeat_timeout=COMPACT_HEARTBEAT_TIMEOUT,
            retry_policy=COMPACT_RETRY,
            summary=f"compact the session before run {inp.run}",
        )
    except ActivityError as exc:
        workflow.logger.warning("run %s: compaction failed, runs left out: %s", inp.run, exc)
