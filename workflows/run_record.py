"""How a run closes its record in the store (`record_run`), as the last step
of AgentRunWorkflow."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models only.
    from fleet_agent.models import ContextInfo, RecordRunRequest, RunInput, RunResult
    from workflows import stubs
    from workflows.policies import STORE_RETRY, STORE_TIMEOUT

__all__ = ["RECORD_LOCALLY_PATCH", "record"]

#: Runs that record this marker close their record with a local activity;
#: histories without it replay the activity task they had.
RECORD_LOCALLY_PATCH = "record-run-locally"


async def record(
    inp: RunInput, result: RunResult, context: ContextInfo | None, final_round: int | None
) -> None:
    """Close the run's record: its outcome, and the prompt's bookkeeping of
    `context` (None when load_context never answered)."""
    request = RecordRunRequest(
        agent_id=inp.agent_id,
        session=inp.session,
        # The spend and LLM cost summaries ride back to the agent only:
        # record_run reads neither, so history need not carry them twice.
        result=result.model_copy(update={"spend": None, "llm_cost": None}),
        final_round=final_round,
        context=None
        if context is None
        else context.model_copy(update={"spend": None, "llm_cost": None}),
        workflow_run_id=workflow.info().run_id,
    )
    summary = f"record run {inp.run} ({result.status.value})"
    if workflow.patched(RECORD_LOCALLY_PATCH):
        # A local activity: run by this worker inside the workflow task that
        # scheduled it, so the run ends in that task, with no activity task
        # through the server and no workflow task after it
        # (docs/DECISIONS.md, "The run's record is written locally").
        await workflow.execute_local_activity(
            stubs.record_run,
            request,
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary=summary,
        )
    else:
        await workflow.execute_activity(
            stubs.record_run,
            request,
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary=summary,
        )
