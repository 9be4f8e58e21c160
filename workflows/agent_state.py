"""What one execution of FleetAgentWorkflow keeps, and the rules of its loop.

`AgentExecution` holds the durable `AgentState` (handed whole to
continue-as-new) and the loop's own part of it and bookkeeping: the phase,
the run in flight, the due time, the wakes, a pending reset, the counters.
The workflow (workflows/agent.py) hands each helper its slice
of the one `AgentState` (docs/decisions/workflow-helpers.md); no helper
holds this object. It also decides when history is long enough to continue
as new, does it, and shows the state (the Web UI's details, `status`).
Deterministic: runs inside the workflow sandbox.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from fleet_agent.loop.inputs import apply_patch, parse_start
    from fleet_agent.loop.schedule import Due
    from fleet_agent.loop.triggers import TriggerBuffer
    from fleet_agent.models import (
        AgentInput,
        AgentState,
        AgentStatus,
        DemandPace,
        InboxItem,
        LlmSpendPace,
        Phase,
        Trigger,
        TriggerKind,
    )
    from fleet_agent.visibility.details import agent_details
    from fleet_agent.visibility.search_attributes import search_phase
    from workflows.metrics import record_agent_state
    from workflows.search_attributes import agent_updates

__all__ = ["THINKING_SUMMARIZED_PATCH", "AgentExecution"]

#: `llm_thinking_display` defaults to "summarized" (fleet_agent/models/config.py);
#: an execution started fresh before that keeps the "omitted" it started with.
THINKING_SUMMARIZED_PATCH = "thinking-display-summarized"

# Continue as new as soon as one of these is reached, whatever the loop is
# doing (a run in flight, paused, debouncing): well before Temporal's hard
# limits (50 MB or 51,200 events of history, 10,000 signals per execution),
# and no later than its default suggestion (4 MB, 4,096 events). Small
# executions also keep a continue-as-new cheap to retry: the server refuses
# it while signals keep arriving, and each refusal costs a full replay of the
# execution (the worker evicts the run from its cache). A flood faster than
# the worker completes workflow tasks can still starve it; Temporal then
# refuses signals past its per-execution limit, with an error to the sender
# (docs/operations/troubleshooting.md, "Signal floods").
_MAX_SIGNALS_PER_EXECUTION = 1_000
_MAX_HISTORY_BYTES = 4 * 1024 * 1024
_MAX_HISTORY_EVENTS = 4_000
# A continue-as-new waits for message texts to reach the store, unless the
# history grows past these (the store is away for long): then it carries them
# in its input (bounded by MAX_UNSTORED_BYTES, under the 512 KB payload limit).
_CRITICAL_HISTORY_BYTES = 20 * 1024 * 1024
_CRITICAL_HISTORY_EVENTS = 20_000
_CRITICAL_SIGNALS = 8_000


class AgentExecution:
    """State and shared rules of one execution of the agent workflow."""

    def __init__(self, agent_id: str, raw: Any) -> None:
        self.agent_id = agent_id
        start = parse_start(raw)
        #: A fresh start (no state handed over): run numbering continues from the store.
        self.fresh = start.state is None
        self.state = start.state or AgentState()
        if self.fresh and not workflow.patched(THINKING_SUMMARIZED_PATCH):
            # Its first task ran on the old default: a running agent keeps its config.
            self.state.config = self.state.config.model_copy(
                update={"llm_thinking_display": "omitted"}
            )
        #: Why the start config was refused ("" when it was not): a bad one
        #: must not fail the workflow task forever, so the defaults hold and
        #: the workflow shows why in status.rejected.
        self.start_problem = start.problem
        if not start.problem and self.fresh and start.config is not None:
            applied = apply_patch(start.config, self.state.config)
            if applied.value is None:
                self.start_problem = applied.error
            else:
                self.state.config = applied.value
        # A fresh start applies them over the last known config (agent_config.py).
        self.start_config = start.config
        #: "watchdog" when the agent's Schedule started this execution.
        self.started_by = start.started_by
        self.phase = self.idle_phase()
        self.current_run: int | None = None
        self.due: Due | None = None
        #: Set when something moved the due time: the loop wakes and recomputes.
        self.changed = False
        self.runs_this_execution = 0
        #: Set once this execution has decided to continue as new.
        self.continuing = False
        self.signals = 0
        self.heartbeat_from = self.state.last_run_ended_at or workflow.now()
        # Whether this execution upserts search attributes (asked at its start).
        self.search_attributes = False
        self.upserted_phase: str | None = None

    # ------------------------------------------------------------ continue-as-new

    def must_continue_as_new(self) -> bool:
        """History is long: continue as new now, even in the middle of a run."""
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or self.signals >= _MAX_SIGNALS_PER_EXECUTION
            or info.get_current_history_size() >= _MAX_HISTORY_BYTES
            or info.get_current_history_length() >= _MAX_HISTORY_EVENTS
        )

    def nearly_full(self) -> bool:
        """Within a tenth of continuing as new (`must_continue_as_new`): a run
        started now would most likely be handed over in flight."""
        info = workflow.info()
        return (
            self.signals >= 0.9 * _MAX_SIGNALS_PER_EXECUTION
            or info.get_current_history_size() >= 0.9 * _MAX_HISTORY_BYTES
            or info.get_current_history_length() >= 0.9 * _MAX_HISTORY_EVENTS
        )

    def should_continue_as_new(self) -> bool:
        """Between runs: also after `continue_as_new_after_runs` runs."""
        return (
            self.must_continue_as_new()
            or self.runs_this_execution >= self.state.config.continue_as_new_after_runs
        )

    def history_critical(self) -> bool:
        info = workflow.info()
        return (
            self.signals >= _CRITICAL_SIGNALS
            or info.get_current_history_size() >= _CRITICAL_HISTORY_BYTES
            or info.get_current_history_length() >= _CRITICAL_HISTORY_EVENTS
        )

    async def continue_as_new(
        self,
        unstored: Callable[[], list[str]],
        taken: Callable[[], list[InboxItem]],
        *,
        reset: bool,
    ) -> NoReturn:
        """Hand the whole state to a fresh execution (a run in flight included).

        Message texts go to the store first (`unstored`: the keys of those
        still waiting), so the new execution's input holds previews only; it
        carries texts itself only when the store has been away so long that
        the history nears Temporal's limits (`taken`: the texts of those a
        run has taken, whose input has their previews only).
        """
        # An `ask` waiting for a run that has not taken its message ends now
        # (workflows/agent_ask.py); one waiting for the run in flight ends
        # with it: either way no caller loses its answer to the handover.
        self.continuing = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        await workflow.wait_condition(lambda: not unstored() or self.history_critical())
        state = self.state.model_copy(deep=True)
        state.unstored_keys = unstored()
        state.unstored_texts = taken()
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

    # ------------------------------------------------------------ the loop's part

    def ask_reset(self, reason: str) -> None:
        """A new session after the current run: the loop wakes for it."""
        self.state.reset_reason = reason
        self.changed = True

    def idle_phase(self) -> Phase:
        """What the agent does while no run is due: frozen, paused or idle."""
        config = self.state.config
        if config.frozen:
            return Phase.FROZEN
        return Phase.PAUSED if config.paused else Phase.IDLE

    # ------------------------------------------------------------ Web UI

    def show(self) -> None:
        """Current details for the Web UI: the state at a glance, in markdown."""
        workflow.set_current_details(
            agent_details(self.state, self.phase, self.current_run, self.due)
        )
        # The gauges follow what the Web UI shows (replay-safe, no command).
        record_agent_state(self.agent_id, self.state, self.phase)
        if self.search_attributes and search_phase(self.phase) != self.upserted_phase:
            # Only when the phase moves: each upsert is an event in history.
            self.upserted_phase = search_phase(self.phase)
            workflow.upsert_search_attributes(agent_updates(self.agent_id, self.phase))

    def status(
        self,
        pending: list[Trigger],
        pending_bytes: int,
        unstored: int,
        demand_pace: DemandPace | None,
        llm_spend: LlmSpendPace | None,
    ) -> AgentStatus:
        """The `status` query (contract: docs/ARCHITECTURE.md): the state, the
        loop, and what the intake and the paces say of theirs."""
        state = self.state
        info = workflow.info()
        heartbeat = (
            None
            if state.config.paused
            else self.heartbeat_from + timedelta(seconds=state.config.heartbeat_seconds)
        )
        return AgentStatus(
            agent_id=self.agent_id,
            session=state.session,
            run_count=state.run_count,
            phase=self.phase,
            current_run=self.current_run,
            pending_triggers=pending,
            next_heartbeat_at=heartbeat,
            next_run_due_at=None if self.due is None else self.due.at,
            wakes=state.wakes,
            last_run=state.last_run,
            config=state.config,
            rejected=state.rejected,
            rejected_total=state.rejected_total,
            executions=state.executions,
            history_length=info.get_current_history_length(),
            history_bytes=info.get_current_history_size(),
            pending_bytes=pending_bytes,
            unstored_messages=unstored,
            frozen=state.freeze,
            pending_approvals=state.pending_approvals,
            spend=state.spend,
            llm_cost=state.llm_cost,
            restarted=state.restarted,
            notify_failures=state.notify.failures,
            notify_delivered=state.notify.delivered,
            demand=state.demand,
            demand_pace=demand_pace,
            llm_spend=llm_spend,
        )
