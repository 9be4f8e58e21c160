"""FleetAgentWorkflow: the long-lived, one-per-fleet agent loop.

wait → debounce → run (a child workflow) → repeat, continuing as new when the
history grows. Everything that made home-made loops misbehave is state here,
changed only inside workflow tasks: pending triggers, wakes, the run counter,
the session number. Runs execute one after another by construction — the loop
waits for each run before it looks for the next trigger, even across a
continue-as-new in the middle of a run.

Nothing that arrives can hurt it: every signal is parsed from loose JSON into
a model or a visible refusal, costs O(1), and is bounded in what it leaves in
state (fleet_agent/triggers.py); the history is handed to a new execution as
soon as it grows large, whatever phase the loop is in.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
)
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from pydantic import BaseModel

    from fleet_agent.details import agent_details, trigger_summary
    from fleet_agent.inputs import (
        Parsed,
        parse_config_patch,
        parse_payload,
        parse_start,
        payload_preview,
    )
    from fleet_agent.models import (
        AgentConfig,
        AgentInput,
        AgentState,
        AgentStatus,
        CancelWake,
        HumanMessage,
        InboxItem,
        LastRun,
        MonitorConfig,
        MonitorInput,
        Phase,
        RecordRunRequest,
        RejectedInput,
        ResetSession,
        RunInFlight,
        RunInput,
        RunResult,
        RunStatus,
        StateChanged,
        StoreMessagesRequest,
        Trigger,
        TriggerKind,
        TriggerNow,
        WaitForRun,
    )
    from fleet_agent.schedule import Due, next_due
    from fleet_agent.triggers import Refusal, TriggerBuffer
    from fleet_agent.wakes import add_wake, due_wakes
    from fleet_agent.wakes import cancel_wake as remove_wake
    from workflows import stubs
    from workflows.monitor import FleetMonitorWorkflow
    from workflows.policies import (
        HANDOVER_HEARTBEAT_TIMEOUT,
        STORE_RETRY,
        STORE_TIMEOUT,
        UNLIMITED_RETRY,
    )
    from workflows.run import AgentRunWorkflow

__all__ = ["FleetAgentWorkflow"]

# Config fields whose change is news for the model (it should re-plan); the
# others (pause, heartbeat, budgets) only change how the loop runs.
_FLEET_FIELDS = frozenset(
    {
        "target_proofs_per_hour",
        "max_instances",
        "max_fleet_dph",
        "max_instance_dph",
        "allowed_gpus",
        "min_reliability",
        "dry_run",
    }
)
_MAX_REJECTED = 20
_MAX_UNRECORDED = 20
# Continue as new as soon as one of these is reached, whatever the loop is
# doing (a run in flight, paused, debouncing): well before Temporal's hard
# limits (50 MB or 51,200 events of history, 10,000 signals per execution),
# and no later than its default suggestion (4 MB, 4,096 events). Small
# executions also keep a continue-as-new cheap to retry: the server refuses
# it while signals keep arriving, and each refusal costs a full replay of the
# execution (the worker evicts the run from its cache). A flood faster than
# the worker completes workflow tasks can still starve it; Temporal then
# refuses signals past its per-execution limit, with an error to the sender
# (docs/OPERATIONS.md, "Signal floods").
_MAX_SIGNALS_PER_EXECUTION = 1_000
_MAX_HISTORY_BYTES = 4 * 1024 * 1024
_MAX_HISTORY_EVENTS = 4_000
# A continue-as-new waits for message texts to reach the store, unless the
# history grows past these (the store is away for long): then it carries them
# in its input (bounded by MAX_UNSTORED_BYTES, under the 512 KB payload limit).
_CRITICAL_HISTORY_BYTES = 20 * 1024 * 1024
_CRITICAL_HISTORY_EVENTS = 20_000
_CRITICAL_SIGNALS = 8_000
_M = TypeVar("_M", bound=BaseModel)
_KNOWN_SIGNALS = "human_message, state_changed, trigger_now, reset_session, cancel_wake"


@workflow.defn
class FleetAgentWorkflow:
    """The agent of one fleet (workflow ID = agent ID).

    Touches: its child runs (AgentRunWorkflow, ID `<agent>/run-<n>`), its
    monitor (`<agent>/monitor`), and through activities the store (run
    numbering on a fresh start, operator message texts, runs lost to a
    timeout) and the Temporal client (a run handed over by continue-as-new).
    Signals: human_message, state_changed, trigger_now, reset_session,
    cancel_wake (and any other name, refused visibly); updates: update_config;
    queries: status, live_config. It never fails: a failed run is recorded and
    the loop goes on.
    """

    @workflow.init
    def __init__(self, raw: Any = None) -> None:
        self._agent_id = workflow.info().workflow_id
        start = parse_start(raw)
        self._fresh = start.state is None
        self._state = start.state or AgentState()
        if start.problem:
            # A bad start config must not fail the workflow task forever:
            # keep the defaults and show why in status.rejected.
            self._reject("start config", start.problem, None)
        elif self._fresh and start.config is not None:
            self._state.config = start.config.apply(self._state.config)
        self._buffer = TriggerBuffer(self._state.pending_triggers, self._state.unstored_keys)
        self._phase = Phase.PAUSED if self._state.config.paused else Phase.IDLE
        self._current_run: int | None = None
        self._due: Due | None = None
        self._changed = False
        self._runs_this_execution = 0
        self._signals = 0
        self._lost = self._state.unrecorded_runs
        self._heartbeat_from = self._state.last_run_ended_at or workflow.now()

    # ------------------------------------------------------------ main loop

    @workflow.run
    async def run(self, raw: Any = None) -> None:
        if self._fresh:
            await self._continue_numbering()
            self._buffer.add_internal(self._make_trigger(TriggerKind.AGENT_STARTED, "fresh start"))
        # Runs in the background for the life of this execution: it moves
        # message texts and lost-run records to the store as they come.
        self._store_task = asyncio.create_task(self._store_loop())
        await self._ensure_monitor()
        if self._state.run_in_flight is not None:
            await self._finish_handed_over_run(self._state.run_in_flight)
        while True:
            await self._wait_until_due()
            if self._state.reset_reason is not None:
                await self._continue_as_new(reset=True)
            if self._should_continue_as_new():
                await self._continue_as_new(reset=False)
            await self._run_once()

    async def _continue_numbering(self) -> None:
        """A fresh start (after a terminate, say) never reuses run numbers."""
        counters = await workflow.execute_activity(
            stubs.load_agent_counters,
            self._agent_id,
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary="continue run numbering from the store",
        )
        self._state.run_count = max(self._state.run_count, counters.max_run)
        self._state.session = max(self._state.session, counters.max_session)

    def _monitor_config(self) -> MonitorConfig:
        config = self._state.config
        return MonitorConfig(
            poll_seconds=config.monitor_poll_seconds,
            target_proofs_per_hour=config.target_proofs_per_hour,
            enabled=config.monitor_enabled,
        )

    async def _ensure_monitor(self) -> None:
        """Start `<agent>/monitor` unless it runs already (it outlives continue-as-new)."""
        if not self._state.config.monitor_enabled:
            return
        try:
            monitor = await workflow.start_child_workflow(
                FleetMonitorWorkflow.run,
                MonitorInput(agent_id=self._agent_id, config=self._monitor_config()),
                id=f"{self._agent_id}/monitor",
                task_queue=workflow.info().task_queue,
                # Abandon: a continue-as-new of the agent must not stop the monitor.
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary="fleet monitor",
            )
            # Nobody awaits the monitor's end; read its outcome so a terminated
            # monitor is not reported as an exception never retrieved.
            monitor.add_done_callback(lambda t: t.cancelled() or t.exception())
        except WorkflowAlreadyStartedError:
            await self._configure_monitor()

    async def _configure_monitor(self) -> None:
        handle = workflow.get_external_workflow_handle(f"{self._agent_id}/monitor")
        try:
            await handle.signal(FleetMonitorWorkflow.configure, self._monitor_config())
        except FailureError as exc:
            workflow.logger.info("monitor not reachable: %s", exc)

    async def _wait_until_due(self) -> None:
        """Sleep until a run is due, a reset is asked for, or history is long.

        The timer is only replaced when the due time actually moves, so a burst
        of a thousand signals inside one debounce window adds no timers.
        """
        while True:
            if self._state.reset_reason is not None or self._should_continue_as_new():
                return
            due = self._compute_due()
            now = workflow.now()
            if due is not None and due.at <= now:
                return
            self._due = due
            self._changed = False
            self._phase = (
                Phase.PAUSED
                if self._state.config.paused
                else Phase.DEBOUNCING
                if due is not None and due.cause == "debounce"
                else Phase.IDLE
            )
            self._show()
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._changed or self._must_continue_as_new(),
                    timeout=None if due is None else due.at - now,
                    timeout_summary=None if due is None else due.label,
                )

    async def _run_once(self) -> None:
        state = self._state
        # The run reads message texts from the store: let them get there first.
        await self._until_stored()
        now = workflow.now()
        fired, state.wakes = due_wakes(state.wakes, now)
        for wake in fired:
            self._buffer.add_internal(
                self._make_trigger(TriggerKind.WAKE, wake.reason, wake_id=wake.id)
            )
        triggers = self._buffer.take() or [self._make_trigger(TriggerKind.HEARTBEAT)]
        state.run_count += 1
        number = state.run_count
        self._current_run, self._phase, self._due = number, Phase.RUNNING, None
        self._show()
        run_input = RunInput(
            agent_id=self._agent_id,
            run=number,
            session=state.session,
            triggers=triggers,
            config=state.config,
            wakes=state.wakes,
            next_heartbeat_at=now + timedelta(seconds=state.config.heartbeat_seconds),
        )
        workflow_id = f"{self._agent_id}/run-{number}"
        try:
            handle = await workflow.start_child_workflow(
                AgentRunWorkflow.run,
                run_input,
                id=workflow_id,
                task_queue=workflow.info().task_queue,
                execution_timeout=timedelta(seconds=state.config.run_timeout_seconds),
                # Abandon: a continue-as-new in the middle of a run must not
                # stop it; the next execution waits for it (RunInFlight).
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"run #{number}: {trigger_summary(triggers)}",
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
        await workflow.wait_condition(lambda: handle.done() or self._must_continue_as_new())
        if not handle.done():
            await self._continue_as_new(reset=False)
        try:
            result = await handle
        except ChildWorkflowError as exc:
            result = self._lost_run(number, now, exc.cause or exc)
        self._apply_result(result)

    async def _finish_handed_over_run(self, flight: RunInFlight) -> None:
        """Wait for the run an earlier execution started and handed over."""
        self._current_run, self._phase = flight.run, Phase.RUNNING
        self._show()
        waiting = workflow.start_activity(
            stubs.wait_for_run,
            WaitForRun(
                run=flight.run,
                workflow_id=flight.workflow_id,
                run_id=flight.run_id,
                started_at=flight.started_at,
            ),
            start_to_close_timeout=timedelta(seconds=self._state.config.run_timeout_seconds)
            + STORE_TIMEOUT,
            heartbeat_timeout=HANDOVER_HEARTBEAT_TIMEOUT,
            retry_policy=UNLIMITED_RETRY,
            summary=f"wait for run #{flight.run} (started before continue-as-new)",
        )
        await workflow.wait_condition(lambda: waiting.done() or self._must_continue_as_new())
        if not waiting.done():
            await self._continue_as_new(reset=False)
        try:
            result = await waiting
        except ActivityError as exc:
            result = self._failed(flight.run, flight.started_at, f"run was lost: {exc.cause}")
        if result.status == RunStatus.FAILED and result.ended_at is None:
            # The run workflow ended without closing its record (timeout, terminate).
            result = self._lost_run(flight.run, flight.started_at, result.error)
        self._apply_result(result)

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
        error = str(cause)
        if not error.startswith("run workflow did not complete"):
            error = f"run workflow did not complete: {error}"
        workflow.logger.error("run %s did not complete: %s", run, cause)
        result = self._failed(run, started, error)
        if len(self._lost) >= _MAX_UNRECORDED:
            # The store has been away for many runs: keep the newest records.
            dropped = self._lost.pop(0)
            workflow.logger.error(
                "run %s stays open in the store (too many lost runs)", dropped.run
            )
        self._lost.append(result)
        return result

    def _apply_result(self, result: RunResult) -> None:
        state = self._state
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
        )
        # The heartbeat counts from the end of the last run, whatever its kind.
        state.last_run_ended_at = ended
        state.run_in_flight = None
        self._heartbeat_from = ended
        self._current_run = None
        self._phase = Phase.IDLE
        self._runs_this_execution += 1

    # ------------------------------------------------------------ the store loop

    async def _store_loop(self) -> None:
        """Move operator message texts and lost-run records to the store.

        Retries for as long as the store is away (STORE_RETRY has no attempt
        limit): a message accepted is never dropped, a lost run never stays
        "running" in the run log.
        """
        while True:
            await workflow.wait_condition(lambda: bool(self._buffer.unstored_keys or self._lost))
            if self._buffer.unstored_keys:
                waiting = len(self._buffer.unstored_keys)
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
                self._buffer.mark_stored(stored)
            if self._lost:
                result = self._lost[0]
                try:
                    await workflow.execute_activity(
                        stubs.record_run,
                        RecordRunRequest(
                            agent_id=self._agent_id, session=self._state.session, result=result
                        ),
                        start_to_close_timeout=STORE_TIMEOUT,
                        retry_policy=STORE_RETRY,
                        summary=f"record run {result.run} as failed",
                    )
                except ActivityError as exc:
                    # Non-retryable: the run never opened a record, nothing to close.
                    workflow.logger.warning(
                        "run %s has no record to close: %s", result.run, exc.cause or exc
                    )
                self._lost.pop(0)

    async def _until_stored(self) -> None:
        while self._buffer.unstored_keys:
            await workflow.wait_condition(
                lambda: not self._buffer.unstored_keys or self._must_continue_as_new()
            )
            if self._must_continue_as_new():
                await self._continue_as_new(reset=False)

    # ------------------------------------------------------------ continue-as-new

    def _must_continue_as_new(self) -> bool:
        """History is long: continue as new now, even in the middle of a run."""
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or self._signals >= _MAX_SIGNALS_PER_EXECUTION
            or info.get_current_history_size() >= _MAX_HISTORY_BYTES
            or info.get_current_history_length() >= _MAX_HISTORY_EVENTS
        )

    def _should_continue_as_new(self) -> bool:
        """Between runs: also after `continue_as_new_after_runs` runs."""
        return (
            self._must_continue_as_new()
            or self._runs_this_execution >= self._state.config.continue_as_new_after_runs
        )

    def _history_critical(self) -> bool:
        info = workflow.info()
        return (
            self._signals >= _CRITICAL_SIGNALS
            or info.get_current_history_size() >= _CRITICAL_HISTORY_BYTES
            or info.get_current_history_length() >= _CRITICAL_HISTORY_EVENTS
        )

    async def _continue_as_new(self, *, reset: bool) -> NoReturn:
        """Hand the whole state to a fresh execution (a run in flight included).

        Message texts go to the store first, so the new execution's input
        holds previews only; it carries texts itself only when the store has
        been away so long that the history nears Temporal's limits.
        """
        await workflow.wait_condition(workflow.all_handlers_finished)
        await workflow.wait_condition(
            lambda: not self._buffer.unstored_keys or self._history_critical()
        )
        state = self._state.model_copy(deep=True)
        state.unstored_keys = self._buffer.unstored_keys
        state.executions += 1
        if reset:
            reason = state.reset_reason or "reset"
            state.reset_reason = None
            state.session += 1
            TriggerBuffer(state.pending_triggers, state.unstored_keys).add_internal(
                Trigger(
                    seq=state.next_trigger_seq,
                    kind=TriggerKind.SESSION_RESET,
                    received_at=workflow.now(),
                    reason=reason,
                )
            )
            state.next_trigger_seq += 1
        workflow.continue_as_new(AgentInput(state=state))

    # ------------------------------------------------------------ triggers

    def _make_trigger(self, kind: TriggerKind, reason: str = "", **fields: Any) -> Trigger:
        trigger = Trigger(
            seq=self._state.next_trigger_seq,
            kind=kind,
            received_at=workflow.now(),
            reason=reason,
            **fields,
        )
        self._state.next_trigger_seq += 1
        return trigger

    def _accepted(self, signal: str, refusal: Refusal | None, raw: Any) -> None:
        """Count a trigger the buffer kept (its seq is used), or show the refusal."""
        if refusal is not None:
            self._reject(signal, refusal.reason, raw)
            return
        self._state.next_trigger_seq += 1
        self._notify()

    def _compute_due(self) -> Due | None:
        return next_due(
            firsts=self._buffer.firsts,
            wakes=self._state.wakes,
            config=self._state.config,
            heartbeat_from=self._heartbeat_from,
        )

    def _notify(self) -> None:
        """Wake the loop only if the due time moved (or a reset is pending)."""
        if self._current_run is not None:
            return  # the loop is awaiting a run; it recomputes afterwards
        if self._state.reset_reason is not None or self._compute_due() != self._due:
            self._changed = True

    def _valid(self, parsed: Parsed[_M], signal: str, raw: Any) -> _M | None:
        if parsed.value is None:
            self._reject(signal, parsed.error, raw)
        return parsed.value

    def _reject(self, signal: str, error: str, raw: Any) -> None:
        workflow.logger.warning("rejected %s: %s", signal, error)
        state = self._state
        state.rejected_total += 1
        state.rejected = [
            *state.rejected[-(_MAX_REJECTED - 1) :],
            RejectedInput(
                at=workflow.now(), signal=signal[:100], error=error, preview=payload_preview(raw)
            ),
        ]

    # ------------------------------------------------------------ signals

    @workflow.signal(
        description='P0: a message from the operator, {"text": str, "author": str} or a bare string'
    )
    def human_message(self, raw: Any) -> None:
        """P0: the operator talks to the agent. `{"text", "author"}` or a bare string."""
        self._signals += 1
        msg = self._valid(parse_payload(HumanMessage, raw, bare="text"), "human_message", raw)
        if msg is not None:
            refusal = self._buffer.add_message(
                self._state.next_trigger_seq, workflow.now(), msg.text, msg.author
            )
            self._accepted("human_message", refusal, raw)

    @workflow.signal(
        description='P1: {"instance_id", "old_state", "new_state", "detail"}; sent by the monitor'
    )
    def state_changed(self, raw: Any) -> None:
        """P1: an instance changed state (sent by the fleet monitor); coalesced per instance."""
        self._signals += 1
        change = self._valid(parse_payload(StateChanged, raw), "state_changed", raw)
        if change is not None:
            refusal = self._buffer.add_state_change(
                self._state.next_trigger_seq,
                workflow.now(),
                instance_id=change.instance_id,
                old_state=change.old_state,
                new_state=change.new_state,
                detail=change.detail,
            )
            self._accepted("state_changed", refusal, raw)

    @workflow.signal(
        description='P0: run as soon as the 2 s window allows; {"reason": str} optional'
    )
    def trigger_now(self, raw: Any = None) -> None:
        """P0: run as soon as the P0 window allows. Argument optional."""
        self._signals += 1
        req = self._valid(
            parse_payload(TriggerNow, raw, bare="reason", optional=True), "trigger_now", raw
        )
        if req is not None:
            refusal = self._buffer.add_trigger_now(
                self._state.next_trigger_seq, workflow.now(), req.reason
            )
            self._accepted("trigger_now", refusal, raw)

    @workflow.signal(
        description="new conversation after the current run; counters, wakes, triggers kept"
    )
    def reset_session(self, raw: Any = None) -> None:
        """Start a new conversation after the current run; counters, wakes and
        pending triggers carry over."""
        self._signals += 1
        req = self._valid(
            parse_payload(ResetSession, raw, bare="reason", optional=True), "reset_session", raw
        )
        if req is not None:
            self._state.reset_reason = req.reason
            self._changed = True

    @workflow.signal(description='drop a pending wake: {"wake_id": str}')
    def cancel_wake(self, raw: Any) -> None:
        """Drop one pending wake by id."""
        self._signals += 1
        req = self._valid(parse_payload(CancelWake, raw, bare="wake_id"), "cancel_wake", raw)
        if req is None:
            return
        self._state.wakes, existed = remove_wake(self._state.wakes, req.wake_id)
        if not existed:
            self._reject("cancel_wake", f"no pending wake {req.wake_id!r}", raw)
        self._notify()

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Any other signal name: recorded in status.rejected, never silently lost."""
        self._signals += 1
        raw: Any = None
        if args:
            with contextlib.suppress(Exception):
                raw = workflow.payload_converter().from_payload(args[0].payload)
        self._reject(name, f"unknown signal {name[:100]!r} (known: {_KNOWN_SIGNALS})", raw)

    # ------------------------------------------------------------ update

    # Bare decorator: with arguments the SDK types an async update as returning
    # a coroutine, which breaks execute_update for callers under mypy.
    @workflow.update
    async def update_config(self, raw: Any) -> AgentConfig:
        """Change part of the config; returns the resulting config. Passes the
        monitor its part (poll interval, target, enabled)."""
        patch = parse_config_patch(raw).value
        if patch is None:
            # The validator refused it already; this only guards a replay of
            # an update accepted by older code.
            raise ApplicationError("invalid config", non_retryable=True)
        old = self._state.config
        self._state.config = patch.apply(old)
        changed = sorted(
            k
            for k in patch.model_dump(exclude_none=True)
            if getattr(old, k) != getattr(self._state.config, k)
        )
        fleet_changes = [k for k in changed if k in _FLEET_FIELDS]
        if fleet_changes:
            self._buffer.add_config_change(
                self._state.next_trigger_seq,
                workflow.now(),
                ", ".join(
                    f"{k}: {getattr(old, k)} → {getattr(self._state.config, k)}"
                    for k in fleet_changes
                ),
            )
            self._state.next_trigger_seq += 1
        self._notify()
        self._show()
        if any(k.startswith("monitor_") or k == "target_proofs_per_hour" for k in changed):
            if self._state.config.monitor_enabled and not old.monitor_enabled:
                await self._ensure_monitor()
            else:
                await self._configure_monitor()
        return self._state.config

    @update_config.validator
    def _validate_config(self, raw: Any) -> None:
        # Runs before the update is written to history: a bad value is refused
        # with a clear message and leaves no trace.
        parsed = parse_config_patch(raw)
        error = parsed.error
        if parsed.value is not None:
            try:
                parsed.value.apply(self._state.config)
            except ValueError as exc:
                error = str(exc).splitlines()[0]
        if error:
            raise ValueError(f"invalid config: {error}")

    # ------------------------------------------------------------ queries

    @workflow.query(
        name="live_config",
        description="the config in force now (fleet tools read it right before acting)",
    )
    def live_config(self) -> AgentConfig:
        """The current config, so a fleet tool call applies guardrails accepted
        after its run started (read-only)."""
        return self._state.config

    @workflow.query(
        description="phase, run count, session, pending triggers, wakes, last run, config"
    )
    def status(self) -> AgentStatus:
        """What the agent is doing now (contract: see docs/ARCHITECTURE.md)."""
        state = self._state
        info = workflow.info()
        heartbeat = (
            None
            if state.config.paused
            else self._heartbeat_from + timedelta(seconds=state.config.heartbeat_seconds)
        )
        return AgentStatus(
            agent_id=self._agent_id,
            session=state.session,
            run_count=state.run_count,
            phase=self._phase,
            current_run=self._current_run,
            pending_triggers=self._buffer.shown(),
            next_heartbeat_at=heartbeat,
            next_run_due_at=None if self._due is None else self._due.at,
            wakes=state.wakes,
            last_run=state.last_run,
            config=state.config,
            rejected=state.rejected,
            rejected_total=state.rejected_total,
            executions=state.executions,
            history_length=info.get_current_history_length(),
            history_bytes=info.get_current_history_size(),
            pending_bytes=self._buffer.bytes,
            unstored_messages=len(self._buffer.unstored_keys),
        )

    @workflow.query(description="internal: operator message texts not yet in the store")
    def unstored_messages(self) -> list[InboxItem]:
        """For the store_operator_messages activity (texts cross history once)."""
        return self._buffer.unstored_items()

    # ------------------------------------------------------------ Web UI

    def _show(self) -> None:
        """Current details for the Web UI: the state at a glance, in markdown."""
        workflow.set_current_details(
            agent_details(self._state, self._phase, self._current_run, self._due)
        )
