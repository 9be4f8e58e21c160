"""FleetAgentWorkflow: the long-lived, one-per-fleet agent loop.

wait → debounce → run (a child workflow) → repeat, continuing as new when the
history grows. Everything that made home-made loops misbehave is state here,
changed only inside workflow tasks: pending triggers, wakes, the run counter,
the session number. Runs execute one after another by construction — the loop
awaits each child before it looks for the next trigger.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
)
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from pydantic import BaseModel, ValidationError

    from fleet_agent.errors import describe_validation_error
    from fleet_agent.models import (
        AgentConfig,
        AgentCounters,
        AgentInput,
        AgentState,
        AgentStatus,
        CancelWake,
        ConfigPatch,
        HumanMessage,
        LastRun,
        MonitorConfig,
        MonitorInput,
        Phase,
        RecordRunRequest,
        RejectedInput,
        ResetSession,
        RunInput,
        RunResult,
        RunStatus,
        StateChanged,
        Trigger,
        TriggerKind,
        TriggerNow,
    )
    from fleet_agent.schedule import Due, next_due
    from fleet_agent.wakes import add_wake, due_wakes
    from fleet_agent.wakes import cancel_wake as remove_wake
    from workflows.monitor import FleetMonitorWorkflow
    from workflows.policies import STORE_RETRY, STORE_TIMEOUT
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
_M = TypeVar("_M", bound="BaseModel")


@workflow.defn
class FleetAgentWorkflow:
    """The agent of one fleet (workflow ID = agent ID).

    Touches: its child runs (AgentRunWorkflow, ID `<agent>/run-<n>`) and, once
    per fresh start, the store (to continue run numbering). Signals:
    human_message, state_changed, trigger_now, reset_session, cancel_wake;
    update: update_config; query: status. It never fails: a failed run is
    recorded and the loop goes on.
    """

    @workflow.init
    def __init__(self, inp: AgentInput) -> None:
        self._agent_id = workflow.info().workflow_id
        self._fresh = inp.state is None
        self._state = inp.state or AgentState()
        if self._fresh and inp.config is not None:
            try:
                self._state.config = inp.config.apply(self._state.config)
            except ValidationError as exc:
                # A bad start config must not fail the workflow task forever:
                # keep the defaults and show why in status.rejected.
                self._reject("start config", describe_validation_error(exc))
        self._phase = Phase.PAUSED if self._state.config.paused else Phase.IDLE
        self._current_run: int | None = None
        self._due: Due | None = None
        self._changed = False
        self._runs_this_execution = 0
        self._heartbeat_from = workflow.now()
        if self._state.last_run_ended_at is not None:
            self._heartbeat_from = self._state.last_run_ended_at

    # ------------------------------------------------------------ main loop

    @workflow.run
    async def run(self, inp: AgentInput) -> None:
        if self._fresh:
            await self._continue_numbering()
            self._add_trigger(TriggerKind.AGENT_STARTED, reason="fresh start")
        await self._ensure_monitor()
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
            "load_agent_counters",
            self._agent_id,
            result_type=AgentCounters,
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
                    lambda: self._changed,
                    timeout=None if due is None else due.at - now,
                    timeout_summary=None if due is None else due.label,
                )

    async def _run_once(self) -> None:
        state = self._state
        now = workflow.now()
        fired, state.wakes = due_wakes(state.wakes, now)
        for wake in fired:
            self._add_trigger(
                TriggerKind.WAKE,
                reason=wake.reason,
                wake_id=wake.id,
                notify=False,
            )
        triggers, state.pending_triggers = state.pending_triggers, []
        if not triggers:
            triggers = [self._make_trigger(TriggerKind.HEARTBEAT)]
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
        try:
            result = await workflow.execute_child_workflow(
                AgentRunWorkflow.run,
                run_input,
                id=f"{self._agent_id}/run-{number}",
                task_queue=workflow.info().task_queue,
                execution_timeout=timedelta(seconds=state.config.run_timeout_seconds),
                static_summary=f"run #{number}: {_trigger_summary(triggers)}",
            )
        except (ChildWorkflowError, WorkflowAlreadyStartedError) as exc:
            cause = getattr(exc, "cause", None) or exc
            workflow.logger.error("run %s did not complete: %s", number, cause)
            result = RunResult(
                run=number,
                status=RunStatus.FAILED,
                error=f"run workflow did not complete: {cause}",
                started_at=now,
                ended_at=workflow.now(),
            )
            await self._record_lost_run(result)
        self._apply_result(result)

    async def _record_lost_run(self, result: RunResult) -> None:
        """Close the store's record of a run whose workflow timed out or was
        terminated, so the run log does not show it running forever."""
        try:
            await workflow.execute_activity(
                "record_run",
                RecordRunRequest(
                    agent_id=self._agent_id, session=self._state.session, result=result
                ),
                start_to_close_timeout=STORE_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=5),
                summary=f"record run {result.run} as failed",
            )
        except ActivityError as exc:
            workflow.logger.warning("could not record run %s: %s", result.run, exc.cause or exc)

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
        self._heartbeat_from = ended
        self._current_run = None
        self._phase = Phase.IDLE
        self._runs_this_execution += 1

    # ------------------------------------------------------------ continue-as-new

    def _should_continue_as_new(self) -> bool:
        return (
            workflow.info().is_continue_as_new_suggested()
            or self._runs_this_execution >= self._state.config.continue_as_new_after_runs
        )

    async def _continue_as_new(self, *, reset: bool) -> None:
        """Hand the whole state to a fresh execution; only ever between runs."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        state = self._state.model_copy(deep=True)
        state.executions += 1
        if reset:
            reason = state.reset_reason or "reset"
            state.reset_reason = None
            state.session += 1
            state.pending_triggers.append(
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

    def _make_trigger(self, kind: TriggerKind, **fields: Any) -> Trigger:
        trigger = Trigger(
            seq=self._state.next_trigger_seq, kind=kind, received_at=workflow.now(), **fields
        )
        self._state.next_trigger_seq += 1
        return trigger

    def _add_trigger(self, kind: TriggerKind, *, notify: bool = True, **fields: Any) -> None:
        self._state.pending_triggers.append(self._make_trigger(kind, **fields))
        if notify:
            self._notify()

    def _compute_due(self) -> Due | None:
        return next_due(
            pending=self._state.pending_triggers,
            wakes=self._state.wakes,
            config=self._state.config,
            heartbeat_from=self._heartbeat_from,
        )

    def _notify(self) -> None:
        """Wake the loop only if the due time moved (or a reset is pending)."""
        if self._current_run is not None:
            return  # the loop is awaiting a run; it recomputes afterwards
        due = self._compute_due()
        if self._state.reset_reason is not None or due != self._due:
            self._changed = True

    def _reject(self, signal: str, error: str) -> None:
        workflow.logger.warning("rejected %s signal: %s", signal, error)
        self._state.rejected = [
            *self._state.rejected[-(_MAX_REJECTED - 1) :],
            RejectedInput(at=workflow.now(), signal=signal, error=error),
        ]

    def _parse(self, model: type[_M], signal: str, raw: Any) -> _M | None:
        try:
            return model.model_validate({} if raw is None else raw)
        except ValidationError as exc:
            self._reject(signal, describe_validation_error(exc))
            return None

    # ------------------------------------------------------------ signals

    @workflow.signal(
        description='P0: a message from the operator, {"text": str, "author": str} or a bare string'
    )
    def human_message(self, raw: Any) -> None:
        """P0: the operator talks to the agent. `{"text", "author"}` or a bare string."""
        msg = self._parse(
            HumanMessage, "human_message", {"text": raw} if isinstance(raw, str) else raw
        )
        if msg is not None:
            self._add_trigger(TriggerKind.HUMAN_MESSAGE, text=msg.text, author=msg.author)

    @workflow.signal(
        description='P1: {"instance_id", "old_state", "new_state", "detail"}; sent by the monitor'
    )
    def state_changed(self, raw: Any) -> None:
        """P1: an instance changed state (sent by the fleet monitor)."""
        change = self._parse(StateChanged, "state_changed", raw)
        if change is not None:
            self._add_trigger(
                TriggerKind.STATE_CHANGED,
                instance_id=change.instance_id,
                old_state=change.old_state,
                new_state=change.new_state,
                detail=change.detail,
            )

    @workflow.signal(
        description='P0: run as soon as the 2 s window allows; {"reason": str} optional'
    )
    def trigger_now(self, raw: Any = None) -> None:
        """P0: run as soon as the P0 window allows. Argument optional."""
        req = self._parse(
            TriggerNow, "trigger_now", {"reason": raw} if isinstance(raw, str) else raw
        )
        if req is not None:
            self._add_trigger(TriggerKind.TRIGGER_NOW, reason=req.reason)

    @workflow.signal(
        description="new conversation after the current run; counters, wakes, triggers kept"
    )
    def reset_session(self, raw: Any = None) -> None:
        """Start a new conversation after the current run; counters, wakes and
        pending triggers carry over."""
        req = self._parse(
            ResetSession, "reset_session", {"reason": raw} if isinstance(raw, str) else raw
        )
        if req is not None:
            self._state.reset_reason = req.reason
            self._changed = True

    @workflow.signal(description='drop a pending wake: {"wake_id": str}')
    def cancel_wake(self, raw: Any) -> None:
        """Drop one pending wake by id."""
        req = self._parse(
            CancelWake, "cancel_wake", {"wake_id": raw} if isinstance(raw, str) else raw
        )
        if req is None:
            return
        self._state.wakes, existed = remove_wake(self._state.wakes, req.wake_id)
        if not existed:
            self._reject("cancel_wake", f"no pending wake {req.wake_id!r}")
        self._notify()

    # ------------------------------------------------------------ update

    # Bare decorator: with arguments the SDK types an async update as returning
    # a coroutine, which breaks execute_update for callers under mypy.
    @workflow.update
    async def update_config(self, raw: dict[str, Any]) -> AgentConfig:
        """Change part of the config; returns the resulting config. Passes the
        monitor its part (poll interval, target, enabled)."""
        patch = ConfigPatch.model_validate(raw)
        old = self._state.config
        self._state.config = patch.apply(old)
        changed = sorted(
            k
            for k in patch.model_dump(exclude_none=True)
            if getattr(old, k) != getattr(self._state.config, k)
        )
        fleet_changes = [k for k in changed if k in _FLEET_FIELDS]
        if fleet_changes:
            self._add_trigger(
                TriggerKind.CONFIG_CHANGED,
                reason=", ".join(
                    f"{k}: {getattr(old, k)} → {getattr(self._state.config, k)}"
                    for k in fleet_changes
                ),
            )
        else:
            self._notify()
        self._show()
        if any(k.startswith("monitor_") or k == "target_proofs_per_hour" for k in changed):
            if self._state.config.monitor_enabled and not old.monitor_enabled:
                await self._ensure_monitor()
            else:
                await self._configure_monitor()
        return self._state.config

    @update_config.validator
    def _validate_config(self, raw: dict[str, Any]) -> None:
        # Runs before the update is written to history: a bad value is refused
        # with a clear message and leaves no trace.
        try:
            patch = ConfigPatch.model_validate(raw)
            patch.apply(self._state.config)
        except ValidationError as exc:
            raise ValueError(f"invalid config: {describe_validation_error(exc)}") from None
        if patch.is_empty():
            raise ValueError("invalid config: the update changes nothing")

    # ------------------------------------------------------------ query

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
            pending_triggers=state.pending_triggers,
            next_heartbeat_at=heartbeat,
            next_run_due_at=None if self._due is None else self._due.at,
            wakes=state.wakes,
            last_run=state.last_run,
            config=state.config,
            rejected=state.rejected,
            executions=state.executions,
            history_length=workflow.info().get_current_history_length(),
        )

    # ------------------------------------------------------------ Web UI

    def _show(self) -> None:
        """Current details for the Web UI: the state at a glance, in markdown."""
        state = self._state
        lines = [
            f"**{self._phase.value}** · session {state.session} · {state.run_count} runs",
        ]
        if self._current_run is not None:
            lines.append(f"running: run #{self._current_run}")
        elif self._due is not None:
            lines.append(f"next: {self._due.label} at {_hms(self._due.at)}")
        if state.pending_triggers:
            lines.append(f"pending triggers: {_trigger_summary(state.pending_triggers)}")
        if state.wakes:
            lines.append(
                "wakes: "
                + ", ".join(f"{w.id} {_hms(w.due_at)} ({w.reason[:40]})" for w in state.wakes[:5])
            )
        if state.last_run is not None:
            last = state.last_run
            lines.append(
                f"last run #{last.run}: {last.status.value}"
                + (" (no-op)" if last.noop else "")
                + (f" — {last.error[:80]}" if last.error else "")
            )
        lines.append(f"target: {state.config.target_proofs_per_hour:g} proofs/h")
        workflow.set_current_details("\n\n".join(lines))


def _hms(at: datetime) -> str:
    return at.strftime("%H:%M:%S")


def _trigger_summary(triggers: list[Trigger]) -> str:
    counts: dict[str, int] = {}
    for t in triggers:
        counts[t.kind.value] = counts.get(t.kind.value, 0) + 1
    return ", ".join(f"{n}× {kind}" if n > 1 else kind for kind, n in counts.items())
