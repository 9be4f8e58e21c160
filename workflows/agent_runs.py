"""Runs of the agent: one at a time, across continue-as-new, none lost.

A run is a child workflow (`AgentRunWorkflow`, ID `<agent>/run-<n>`) started
with ParentClosePolicy.ABANDON: if the history must be handed on in the middle
of a run, the agent continues as new and the next execution waits for that
run by ID (`wait_for_run`). A run whose workflow ended without closing its
record (timeout, terminate) is closed as failed by the store loop, which also
moves operator message texts to the store, retrying for as long as the store
is away. A run does not wait for that: a message whose text is not stored yet
goes into the run whole (up to RUN_CARRIES_UNSTORED_BYTES of them), and the
run's `load_context` stores it (the same key: whichever write comes second
is a no-op). `RunLauncher` does this for the workflow's loop (workflows/agent.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from fleet_agent.demand.events import MAX_EVENTS, merge_event
    from fleet_agent.loop.pace import usd
    from fleet_agent.loop.triggers import RUN_CARRIES_UNSTORED_BYTES
    from fleet_agent.loop.wakes import add_wake, due_wakes
    from fleet_agent.loop.wakes import cancel_wake as remove_wake
    from fleet_agent.models import (
        LastRun,
        Phase,
        RecordRunRequest,
        RunInFlight,
        RunInput,
        RunResult,
        RunStatus,
        StoreMessagesRequest,
        TriggerKind,
        WaitForRun,
    )
    from fleet_agent.notify.run_notices import auth_failure
    from fleet_agent.visibility.details import trigger_summary
    from workflows import stubs
    from workflows.agent_approvals import ApprovalsBook
    from workflows.agent_monitor import MonitorLink
    from workflows.agent_state import AgentExecution
    from workflows.metrics import record_run_finished, record_run_started
    from workflows.policies import (
        HANDOVER_HEARTBEAT_TIMEOUT,
        STORE_RETRY,
        STORE_TIMEOUT,
        UNLIMITED_RETRY,
    )
    from workflows.run import AgentRunWorkflow
    from workflows.search_attributes import run_start_attributes

__all__ = ["DEMAND_EVENTS_PATCH", "EVENT_OWNERS_PATCH", "RUN_CARRIES_TEXTS_PATCH", "RunLauncher"]

_MAX_UNRECORDED = 20


#: The run stores the message texts it carries (`RunLauncher.run_once`).
RUN_CARRIES_TEXTS_PATCH = "run-carries-unstored-texts"
#: A run's `expect_demand` events go into the config and to the monitor.
DEMAND_EVENTS_PATCH = "run-demand-events"
#: ... as the model's (`DemandEvent.set_by`): within its share, never
#: displacing an operator's (fleet_agent/demand/events.py).
EVENT_OWNERS_PATCH = "demand-event-owners"


class RunLauncher:
    """Starting, awaiting and recording runs; the background store loop."""

    def __init__(self, ex: AgentExecution, approvals: ApprovalsBook, monitor: MonitorLink) -> None:
        self._ex = ex
        self._approvals = approvals
        self._monitor = monitor

    async def run_once(self) -> None:
        """Start the next run with the pending triggers (or a heartbeat) and wait for it."""
        ex = self._ex
        state = ex.state
        # The run reads message texts from the store. A few not there yet go
        # into the run whole and its load_context stores them: under load the
        # store loop's activity can outlast the P0 window (docs/decisions/load-time.md,
        # "A run does not wait for the store"). Histories from before replay
        # the wait.
        if not (
            ex.buffer.unstored_bytes <= RUN_CARRIES_UNSTORED_BYTES
            and workflow.patched(RUN_CARRIES_TEXTS_PATCH)
        ):
            await self._until_stored()
        now = workflow.now()
        fired, state.wakes = due_wakes(state.wakes, now)
        for wake in fired:
            ex.buffer.add_internal(ex.make_trigger(TriggerKind.WAKE, wake.reason, wake_id=wake.id))
        triggers = ex.buffer.take() or [ex.make_trigger(TriggerKind.HEARTBEAT)]
        state.run_count += 1
        number = state.run_count
        ex.current_run, ex.phase, ex.due = number, Phase.RUNNING, None
        ex.budget.started()
        record_run_started(ex.agent_id, triggers, now)
        ex.show()
        run_input = RunInput(
            agent_id=ex.agent_id,
            run=number,
            session=state.session,
            triggers=triggers,
            config=state.config,
            wakes=state.wakes,
            next_heartbeat_at=now + timedelta(seconds=state.config.heartbeat_seconds),
            search_attributes=ex.search_attributes,
        )
        workflow_id = f"{ex.agent_id}/run-{number}"
        try:
            handle = await workflow.start_child_workflow(
                AgentRunWorkflow.run,
                run_input,
                id=workflow_id,
                task_queue=workflow.info().task_queue,
                # Its own time plus the time it may wait for an operator.
                execution_timeout=timedelta(seconds=state.config.run_deadline_seconds()),
                # Abandon: a continue-as-new in the middle of a run must not
                # stop it; the next execution waits for it (RunInFlight).
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"run #{number}: {trigger_summary(triggers)}",
                # Set with the start: no event of their own.
                search_attributes=run_start_attributes(ex.agent_id, triggers)
                if ex.search_attributes
                else None,
            )
        except WorkflowAlreadyStartedError as exc:
            # Another workflow holds this ID (the agent was reset in Temporal
            # while that run still ran): it keeps its own record.
            self._apply_result(self._failed(number, now, f"run workflow could not start: {exc}"))
            return
        state.run_in_flight = RunInFlight(
            run=number,
            workflow_id=workflow_id,
            run_id=handle.first_execution_run_id or "",
            started_at=now,
            triggers=len(triggers),
        )
        await workflow.wait_condition(lambda: handle.done() or ex.must_continue_as_new())
        if not handle.done():
            await ex.continue_as_new(reset=False)
        try:
            result = await handle
        except ChildWorkflowError as exc:
            result = self._lost_run(number, now, exc.cause or exc)
        self._apply_result(result)
        await self._take_events(result)

    async def finish_handed_over_run(self, flight: RunInFlight) -> None:
        """Wait for the run an earlier execution started and handed over."""
        ex = self._ex
        ex.current_run, ex.phase = flight.run, Phase.RUNNING
        ex.show()
        waiting = workflow.start_activity(
            stubs.wait_for_run,
            WaitForRun(
                run=flight.run,
                workflow_id=flight.workflow_id,
                run_id=flight.run_id,
                started_at=flight.started_at,
            ),
            start_to_close_timeout=timedelta(seconds=ex.state.config.run_deadline_seconds())
            + STORE_TIMEOUT,
            heartbeat_timeout=HANDOVER_HEARTBEAT_TIMEOUT,
            retry_policy=UNLIMITED_RETRY,
            summary=f"wait for run #{flight.run} (started before continue-as-new)",
        )
        await workflow.wait_condition(lambda: waiting.done() or ex.must_continue_as_new())
        if not waiting.done():
            await ex.continue_as_new(reset=False)
        try:
            result = await waiting
        except ActivityError as exc:
            result = self._failed(flight.run, flight.started_at, f"run was lost: {exc.cause}")
        if result.status == RunStatus.FAILED and result.ended_at is None:
            # The run workflow ended without closing its record (timeout, terminate).
            result = self._lost_run(flight.run, flight.started_at, result.error)
        self._apply_result(result)
        await self._take_events(result)

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
        lost = self._ex.lost
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

    def _apply_result(self, result: RunResult) -> None:
        ex = self._ex
        state = ex.state
        record_run_finished(ex.agent_id, result)
        self._notify(result)
        for request in result.wake_requests:
            if request.op == "add" and request.wake is not None:
                state.wakes = add_wake(state.wakes, request.wake)
            elif request.op == "cancel":
                state.wakes, _ = remove_wake(state.wakes, request.wake_id)
        ended = workflow.now()
        state.last_run = LastRun(
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
            state.spend = result.spend
        if result.llm_cost is not None:
            state.llm_cost = result.llm_cost
        # What this run paid the model counts toward max_llm_usd_per_hour.
        ex.budget.record(usd(result.cost_usd), ended)
        # The heartbeat counts from the end of the last run, whatever its kind.
        state.last_run_ended_at = ended
        state.run_in_flight = None
        self._approvals.drop_of(result.run)
        ex.heartbeat_from = ended
        ex.current_run = None
        ex.phase = Phase.IDLE
        ex.runs_this_execution += 1

    async def _take_events(self, result: RunResult) -> None:
        """The known demand events the run recorded (`expect_demand`): into the
        config, as `update_config` would put them (the kept config follows:
        ConfigKeeper), and to the monitor, which forecasts with them. The rule
        is the run's (fleet_agent/demand/events.py), applied again to the
        config as it is now: an operator may have changed it meanwhile."""
        if not result.demand_events or not workflow.patched(DEMAND_EVENTS_PATCH):
            return
        ex = self._ex
        old = ex.state.config
        events = list(old.demand_events)
        now = workflow.now()
        # The model's, whatever the payload says: the agent decides who set
        # what (a run of an older release sent no owner). Before the patch,
        # every event was merged as an operator's is.
        owner = "model" if workflow.patched(EVENT_OWNERS_PATCH) else "operator"
        for sent in result.demand_events:
            event = sent.model_copy(update={"set_by": owner})
            merged = merge_event(events, event, now)
            if merged.refused:
                workflow.logger.warning(
                    "agent %s did not add known event %s of run %s: %s",
                    ex.agent_id,
                    event.describe(),
                    result.run,
                    merged.refused,
                )
                continue
            events = merged.events
            for dropped in merged.dropped:
                workflow.logger.warning(
                    "agent %s dropped known event %s: run %s added %s (at most %s kept)",
                    ex.agent_id,
                    dropped.describe(),
                    result.run,
                    event.describe(),
                    MAX_EVENTS,
                )
        if events == old.demand_events:
            return
        # No trigger and no new due time: the run that added them knows.
        ex.state.config = old.model_copy(update={"demand_events": events})
        if ex.state.config.monitor_enabled and not ex.state.config.frozen:
            await self._monitor.configure()

    def _notify(self, result: RunResult) -> None:
        """What a run's end tells a human: its notices, a rejected key, a
        streak of failures (workflows/agent_notify.py)."""
        notifier = self._ex.notifier
        for notice in result.notices:
            notifier.emit(
                notice.kind,
                notice.subject,
                run=result.run,
                reason=notice.text[:300],
                error=notice.text[:300],
            )
        provider = auth_failure(result.error) if result.error else None
        if provider is not None:
            notifier.emit("auth_failing", provider, run=result.run, error=result.error[:400])
        notifier.run_ended(result.run, result.status == RunStatus.FAILED, result.error)

    # ------------------------------------------------------------ the store loop

    async def store_loop(self) -> None:
        """Move operator message texts and lost-run records to the store.

        Retries for as long as the store is away (STORE_RETRY has no attempt
        limit): a message accepted is never dropped, a lost run never stays
        "running" in the run log.
        """
        ex = self._ex
        buffer, lost = ex.buffer, ex.lost
        while True:
            await workflow.wait_condition(lambda: bool(buffer.unstored_keys or lost))
            if buffer.unstored_keys:
                waiting = len(buffer.unstored_keys)
                try:
                    stored = await workflow.execute_activity(
                        stubs.store_operator_messages,
                        StoreMessagesRequest(agent_id=ex.agent_id),
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
                buffer.mark_stored(stored)
            if lost:
                result = lost[0]
                try:
                    cost = await workflow.execute_activity(
                        stubs.record_run,
                        RecordRunRequest(
                            agent_id=ex.agent_id, session=ex.state.session, result=result
                        ),
                        start_to_close_timeout=STORE_TIMEOUT,
                        retry_policy=STORE_RETRY,
                        summary=f"record run {result.run} as failed",
                    )
                    # Its rounds were paid even though it never answered.
                    ex.budget.record(usd(cost), workflow.now())
                    ex.notify()
                except ActivityError as exc:
                    # Non-retryable: the run never opened a record, nothing to close.
                    workflow.logger.warning(
                        "run %s has no record to close: %s", result.run, exc.cause or exc
                    )
                lost.pop(0)

    async def _until_stored(self) -> None:
        ex = self._ex
        while ex.buffer.unstored_keys:
            await workflow.wait_condition(
                lambda: not ex.buffer.unstored_keys or ex.must_continue_as_new()
            )
            if ex.must_continue_as_new():
                await ex.continue_as_new(reset=False)
