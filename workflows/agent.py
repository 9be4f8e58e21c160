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

The class is assembled from workflows/agent_core.py (state, shared rules),
workflows/agent_inputs.py (signals, update, queries) and
workflows/agent_runs.py (runs, the store loop).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models, pure helpers and the mixins' classes.
    from fleet_agent.inputs import parse_start
    from fleet_agent.models import (
        AgentInput,
        AgentState,
        MonitorConfig,
        MonitorInput,
        Phase,
        Trigger,
        TriggerKind,
    )
    from fleet_agent.triggers import TriggerBuffer
    from workflows import stubs
    from workflows.agent_approvals import ApprovalsMixin
    from workflows.agent_freeze import FreezeMixin
    from workflows.agent_inputs import InputsMixin
    from workflows.agent_runs import RunsMixin
    from workflows.monitor import FleetMonitorWorkflow
    from workflows.policies import (
        MONITOR_PRIORITY,
        STORE_RETRY,
        STORE_TIMEOUT,
        VISIBILITY_RETRY,
        VISIBILITY_TIMEOUT,
    )
    from workflows.search_attributes import PATCH as SEARCH_ATTRIBUTES_PATCH

__all__ = ["HANDOVER_STATUS_PATCH", "FleetAgentWorkflow"]

#: An execution handed a run in flight says so from its first task (before
#: that, status showed it idle until its monitor check and search-attribute
#: check were done: under load, seconds).
HANDOVER_STATUS_PATCH = "handover-status-at-start"


@workflow.defn
class FleetAgentWorkflow(InputsMixin, FreezeMixin, ApprovalsMixin, RunsMixin):
    """The agent of one fleet (workflow ID = agent ID).

    Touches: its child runs (AgentRunWorkflow, ID `<agent>/run-<n>`), its
    monitor (`<agent>/monitor`), the run waiting for an approval (the
    decision, by signal), and through activities the store (run
    numbering on a fresh start, operator message texts, runs lost to a
    timeout) and the Temporal client (a run handed over by continue-as-new).
    Signals: human_message, state_changed, trigger_now, reset_session,
    cancel_wake, and from its runs approval_requested / approval_closed (any
    other name is refused visibly); updates: update_config, freeze, unfreeze,
    decide_approval; queries: status, live_config. It never fails: a failed run is recorded and
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
        self._phase = self._idle_phase()
        self._current_run = None
        self._due = None
        self._changed = False
        self._runs_this_execution = 0
        self._signals = 0
        self._lost = self._state.unrecorded_runs
        self._heartbeat_from = self._state.last_run_ended_at or workflow.now()
        # Whether this execution upserts search attributes (asked at its start).
        self._search_attributes = False
        self._upserted_phase: str | None = None

    # ------------------------------------------------------------ main loop

    @workflow.run
    async def run(self, raw: Any = None) -> None:
        flight = self._state.run_in_flight
        if flight is not None and workflow.patched(HANDOVER_STATUS_PATCH):
            self._current_run, self._phase = flight.run, Phase.RUNNING
        if workflow.patched(SEARCH_ATTRIBUTES_PATCH):
            await self._check_search_attributes()
        if self._fresh:
            await self._continue_numbering()
            self._buffer.add_internal(self._make_trigger(TriggerKind.AGENT_STARTED, "fresh start"))
        # Runs in the background for the life of this execution: it moves
        # message texts and lost-run records to the store as they come.
        self._store_task = asyncio.create_task(self._store_loop())
        await self._ensure_monitor()
        if flight is not None:
            await self._finish_handed_over_run(flight)
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

    async def _check_search_attributes(self) -> None:
        """Upsert search attributes in this execution only if the namespace has
        them all: an unregistered one would fail every workflow task."""
        try:
            self._search_attributes = await workflow.execute_activity(
                stubs.search_attributes_ready,
                start_to_close_timeout=VISIBILITY_TIMEOUT,
                retry_policy=VISIBILITY_RETRY,
                summary="are our search attributes registered?",
            )
        except ActivityError as exc:
            workflow.logger.warning("search attributes not checked: %s", exc.cause or exc)
        self._show()

    def _monitor_config(self) -> MonitorConfig:
        config = self._state.config
        return MonitorConfig(
            poll_seconds=config.monitor_poll_seconds,
            target_proofs_per_hour=config.target_proofs_per_hour,
            # A frozen agent's monitor stops: no triggers, no reconcile.
            enabled=config.monitor_enabled and not config.frozen,
            not_proving_minutes=config.not_proving_minutes,
            offline_grace_minutes=config.offline_grace_minutes,
            min_release_age_minutes=config.min_release_age_minutes,
            failed_host_ttl_hours=config.failed_host_ttl_hours,
            spare_one_machine=config.spare_one_machine,
        )

    async def _ensure_monitor(self) -> None:
        """Start `<agent>/monitor` unless it runs already (it outlives continue-as-new)."""
        if not self._monitor_config().enabled:
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
                priority=MONITOR_PRIORITY,
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
                self._idle_phase()
                if self._state.config.paused or self._state.config.frozen
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

    # ------------------------------------------------------------ continue-as-new

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
