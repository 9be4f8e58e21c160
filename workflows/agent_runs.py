"""Runs of the agent: one at a time, across continue-as-new, none lost.

A run is a child workflow (`AgentRunWorkflow`, ID `<agent>/run-<n>`) started
with ParentClosePolicy.ABANDON: if the history must be handed on in the middle
of a run, the agent continues as new and the next execution waits for that
run by ID (`wait_for_run`). A run whose workflow ended without closing its
record (timeout, terminate) is closed as failed by the store loop, which also
moves operator message texts to the store, retrying for as long as the store
is away. A run does not wait for that (up to RUN_CARRIES_UNSTORED_BYTES of
texts not stored yet): its input carries each message's preview, and its
`load_context` fetches a text the store lacks by the loop's own path, the
agent's `unstored_messages` query (the same key: whichever write comes
second is a no-op). A text crosses history once, in its signal.

`RunLauncher` owns the runs' slice of the agent's state (`RunsSlice`: the
numbering, the run in flight, the last run and what it brought back, the
runs lost and not yet closed in the store). It starts a run, awaits it and
records how it ended; the workflow's loop (workflows/agent.py) decides
when, gives it the triggers and the config, and does what a run's end means
for the other parts. Touches: the child runs, the activities
load_agent_counters, wait_for_run, store_operator_messages and record_run
(→ the store, the Temporal client). Deterministic: workflow code.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from fleet_agent.loop.pace import usd
    from fleet_agent.models import (
        AgentConfig,
        LastRun,
        LlmCostSummary,
        RecordRunRequest,
        RunInFlight,
        RunInput,
        RunResult,
        RunStatus,
        SpendSummary,
        StoreMessagesRequest,
        WaitForRun,
    )
    from fleet_agent.visibility.details import trigger_summary
    from workflows import stubs
    from workflows.policies import (
        HANDOVER_HEARTBEAT_TIMEOUT,
        STORE_RETRY,
        STORE_TIMEOUT,
        UNLIMITED_RETRY,
    )
    from workflows.run import AgentRunWorkflow
    from workflows.search_attributes import run_start_attributes

__all__ = ["RUN_CARRIES_TEXTS_PATCH", "MessageTexts", "RunLauncher", "RunsSlice"]

_MAX_UNRECORDED = 20


#: A run does not wait for the store loop: its load_context fetches the texts
#: not stored yet (the workflow's loop). The ID is the first form's, when the
#: run carried them whole; the marker means the same wait either way.
RUN_CARRIES_TEXTS_PATCH = "run-carries-unstored-texts"

Run = workflow.ChildWorkflowHandle[Any, RunResult]


class RunsSlice(Protocol):
    """The runs' slice of the durable state (fields of `AgentState`)."""

    session: int
    run_count: int
    last_run: LastRun | None
    last_run_ended_at: datetime | None
    run_in_flight: RunInFlight | None
    unrecorded_runs: list[RunResult]
    spend: SpendSummary | None
    llm_cost: LlmCostSummary | None


class MessageTexts(Protocol):
    """The operator message texts the store loop moves to the store (the
    workflow's `Intake` is one)."""

    @property
    def unstored_keys(self) -> list[str]: ...

    def mark_stored(self, keys: list[str]) -> None: ...


class RunLauncher:
    """Starting, awaiting and recording runs (the `RunsSlice` only); the store loop."""

    def __init__(self, slice_: RunsSlice, agent_id: str) -> None:
        self._s = slice_
        self._agent_id = agent_id

    @property
    def run_count(self) -> int:
        return self._s.run_count

    async def continue_numbering(self) -> None:
        """A fresh start (after a terminate, say) never reuses run numbers."""
        counters = await workflow.execute_activity(
            stubs.load_agent_counters,
            self._agent_id,
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary="continue run numbering from the store",
        )
        s = self._s
        s.run_count = max(s.run_count, counters.max_run)
        s.session = max(s.session, counters.max_session)

    def next_number(self) -> int:
        self._s.run_count += 1
        return self._s.run_count

    async def start(self, run_input: RunInput, search_attributes: bool) -> Run | RunResult:
        """Start run `run_input.run`: its handle (it is in flight), or its
        result when it could not start."""
        number, triggers, now = run_input.run, run_input.triggers, workflow.now()
        workflow_id = f"{self._agent_id}/run-{number}"
        try:
            handle = await workflow.start_child_workflow(
                AgentRunWorkflow.run,
                run_input,
                id=workflow_id,
                task_queue=workflow.info().task_queue,
                # Its own time plus the time it may wait for an operator.
                execution_timeout=timedelta(seconds=run_input.config.run_deadline_seconds()),
                # Abandon: a continue-as-new in the middle of a run must not
                # stop it; the next execution waits for it (RunInFlight).
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"run #{number}: {trigger_summary(triggers)}",
                # Set with the start: no event of their own.
                search_attributes=run_start_attributes(self._agent_id, triggers)
                if search_attributes
                else None,
            )
        except WorkflowAlreadyStartedError as exc:
            # Another workflow holds this ID (the agent was reset in Temporal
            # while that run still ran): it keeps its own record.
            return self._failed(number, now, f"run workflow could not start: {exc}")
        self._s.run_in_flight = RunInFlight(
            run=number,
            workflow_id=workflow_id,
            run_id=handle.first_execution_run_id or "",
            started_at=now,
            triggers=len(triggers),
        )
        return handle

    async def outcome(self, handle: Run, number: int, started: datetime) -> RunResult:
        """The result of a run that ended (a run lost to a timeout or a
        terminate is closed as failed)."""
        try:
            return await handle
        except ChildWorkflowError as exc:
            return self._lost_run(number, started, exc.cause or exc)

    def wait_for(
        self, flight: RunInFlight, config: AgentConfig
    ) -> workflow.ActivityHandle[RunResult]:
        """Wait for the run an earlier execution started and handed over."""
        return workflow.start_activity(
            stubs.wait_for_run,
            WaitForRun(
                run=flight.run,
                workflow_id=flight.workflow_id,
                run_id=flight.run_id,
                started_at=flight.started_at,
            ),
            start_to_close_timeout=timedelta(seconds=config.run_deadline_seconds()) + STORE_TIMEOUT,
            heartbeat_timeout=HANDOVER_HEARTBEAT_TIMEOUT,
            retry_policy=UNLIMITED_RETRY,
            summary=f"wait for run #{flight.run} (started before continue-as-new)",
        )

    async def handed_over_outcome(
        self, flight: RunInFlight, waiting: workflow.ActivityHandle[RunResult]
    ) -> RunResult:
        try:
            result = await waiting
        except ActivityError as exc:
            result = self._failed(flight.run, flight.started_at, f"run was lost: {exc.cause}")
        if result.status == RunStatus.FAILED and result.ended_at is None:
            # The run workflow ended without closing its record (timeout, terminate).
            result = self._lost_run(flight.run, flight.started_at, result.error)
        return result

    def _failed(self, run: int, started: datetime, error: str) -> RunResult:
        return RunResult(
            run=run,
            status=RunStatus.FAILED,
            error=error,
            started_at=started,
            ended_at=workflow.now(),
        )

    def _lost_run(self, run: int, started: datetime, cause: object) -> RunResult:
        """A run whose workflow timed out or was terminated: closed as failed
        in the store by the store loop, for as long as the store takes."""
        lost = self._s.unrecorded_runs
        error = str(cause)
        if not error.startswith("run workflow did not complete"):
            error = f"run workflow did not complete: {error}"
        workflow.logger.error("run %s did not complete: %s", run, cause)
        result = self._failed(run, started, error)
        if len(lost) >= _MAX_UNRECORDED:
            # The store has been away for many runs: keep the newest records.
            dropped = lost.pop(0)
            workflow.logger.error(
                "run %s stays open in the store (too many lost runs)", dropped.run
            )
        lost.append(result)
        return result

    def ended(self, result: RunResult) -> datetime:
        """Record how a run ended (the last run, what it brought back); the
        time it was taken in, from which the heartbeat counts."""
        s = self._s
        ended = workflow.now()
        s.last_run = LastRun(
            run=result.run,
            status=result.status,
            verdict=result.verdict,
            noop=result.noop,
            in_prompt=result.in_prompt,
            verdict_error=result.verdict_error,
            error=result.error,
            started_at=result.started_at,
            ended_at=result.ended_at or ended,
            dph_added=result.dph_added,
            dph_removed=result.dph_removed,
            answer=result.answer,
        )
        if result.spend is not None:
            # Spend is read by the run's load_context, not by the workflow.
            s.spend = result.spend
        if result.llm_cost is not None:
            s.llm_cost = result.llm_cost
        s.last_run_ended_at = ended
        s.run_in_flight = None
        return ended

    # ------------------------------------------------------------ the store loop

    async def store_loop(self, texts: MessageTexts, recorded: Callable[[float], None]) -> None:
        """Move operator message texts and lost-run records to the store.

        Retries for as long as the store is away (STORE_RETRY has no attempt
        limit): a message accepted is never dropped, a lost run never stays
        "running" in the run log. `recorded` is told what a lost run's rounds
        cost once it is closed.
        """
        lost = self._s.unrecorded_runs
        while True:
            await workflow.wait_condition(lambda: bool(texts.unstored_keys or lost))
            if texts.unstored_keys:
                waiting = len(texts.unstored_keys)
                try:
                    stored = await workflow.execute_activity(
                        stubs.store_operator_messages,
                        StoreMessagesRequest(agent_id=self._agent_id),
                        start_to_close_timeout=STORE_TIMEOUT,
                        retry_policy=STORE_RETRY,
                        summary=f"store operator messages ({waiting} waiting)",
                    )
                except ActivityError as exc:
                    # Only a non-retryable failure gets here; try again later
                    # rather than end this loop.
                    workflow.logger.error("could not store messages: %s", exc.cause or exc)
                    await workflow.sleep(STORE_TIMEOUT, summary="store retry pause")
                    continue
                texts.mark_stored(stored)
            if lost:
                result = lost[0]
                try:
                    cost = await workflow.execute_activity(
                        stubs.record_run,
                        RecordRunRequest(
                            agent_id=self._agent_id, session=self._s.session, result=result
                        ),
                        start_to_close_timeout=STORE_TIMEOUT,
                        retry_policy=STORE_RETRY,
                        summary=f"record run {result.run} as failed",
                    )
                    # Its rounds were paid even though it never answered.
                    recorded(usd(cost))
                except ActivityError as exc:
                    # Non-retryable: the run never opened a record, nothing to close.
                    workflow.logger.warning(
                        "run %s has no record to close: %s", result.run, exc.cause or exc
                    )
                lost.pop(0)
