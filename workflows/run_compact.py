"""The run's compaction step: fold what left the history window before round 1.

Called only when `load_context` reports runs outside the window that the
session's summary does not cover yet (`ContextInfo.compaction_due`), so most
runs add nothing to their history. A failure here never fails the run: the
prompt's window already keeps it within budget without those runs, and the
next run folds them.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and the activity declarations.
    from fleet_agent.models import CompactRequest, ContextInfo, RunInput
    from workflows import stubs

__all__ = ["COMPACT_PATCH", "COMPACT_TIMEOUT", "compact_if_due"]

COMPACT_PATCH = "session-summary"
"""Runs recorded before compaction existed replay without the activity."""

# The summariser's own timeout (activities/compact.py, 60 s) plus the digest
# and the store writes; a retry finds the summary written, or folds again.
COMPACT_TIMEOUT = timedelta(seconds=120)
COMPACT_HEARTBEAT_TIMEOUT = timedelta(seconds=30)
COMPACT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=5,
)


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
