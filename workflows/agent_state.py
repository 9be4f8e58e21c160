"""What one execution of FleetAgentWorkflow keeps, and the rules every part shares.

`AgentExecution` holds the durable `AgentState` (handed whole to
continue-as-new), the trigger buffer over it and the loop's bookkeeping
(phase, run in flight, due time, counters). The workflow's helpers — the
intake of signals (workflows/agent_inputs.py), approvals
(workflows/agent_approvals.py), the kill switch (workflows/agent_freeze.py),
runs (workflows/agent_runs.py) and the monitor link
(workflows/agent_monitor.py) — all work on the one instance the workflow
holds. It also decides when history is long enough to continue as new, and
does it. Deterministic: runs inside the workflow sandbox.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from pydantic import BaseModel

    from fleet_agent.loop.inputs import Parsed, apply_patch, parse_start, payload_preview
    from fleet_agent.loop.schedule import Due, next_due
    from fleet_agent.loop.triggers import Refusal, TriggerBuffer
    from fleet_agent.models import (
        AgentInput,
        AgentState,
        Phase,
        RejectedInput,
        RunResult,
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

_MAX_REJECTED = 20
_LOGGED_REJECTIONS = 10
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
_M = TypeVar("_M", bound=BaseModel)


def _unheld(due: Due | None) -> Due | None:
    return due


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
        if start.problem:
            # A bad start config must not fail the workflow task forever:
            # keep the defaults and show why in status.rejected.
            self.reject("start config", start.problem, None)
        elif self.fresh and start.config is not None:
            applied = apply_patch(start.config, self.state.config)
            if applied.value is None:
                self.reject("start config", applied.error, None)
            else:
                self.state.config = applied.value
        # A fresh start applies them over the last known config (agent_config.py).
        self.start_config = start.config
        #: "watchdog" when the agent's Schedule started this execution.
        self.started_by = start.started_by
        self.buffer = TriggerBuffer(self.state.pending_triggers, self.state.unstored_keys)
        self.phase = self.idle_phase()
        self.current_run: int | None = None
        self.due: Due | None = None
        #: Set when something moved the due time: the loop wakes and recomputes.
        self.changed = False
        self.runs_this_execution = 0
        #: Set once this execution has decided to continue as new.
        self.continuing = False
        self.signals = 0
        #: Runs lost to a timeout or terminate, not yet closed in the store.
        self.lost: list[RunResult] = self.state.unrecorded_runs
        self.heartbeat_from = self.state.last_run_ended_at or workflow.now()
        # Whether this execution upserts search attributes (asked at its start).
        self.search_attributes = False
        self.upserted_phase: str | None = None
        #: Moves a due time later while the LLM spend cap holds runs: the
        #: workflow hands its `LlmBudget.hold` (workflows/agent_pace.py).
        self.hold: Callable[[Due | None], Due | None] = _unheld

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

    async def continue_as_new(self, *, reset: bool) -> NoReturn:
        """Hand the whole state to a fresh execution (a run in flight included).

        Message texts go to the store first, so the new execution's input
        holds previews only; it carries texts itself only when the store has
        been away so long that the history nears Temporal's limits.
        """
        # An `ask` waiting for a run that has not taken its message ends now
        # (workflows/agent_ask.py); one waiting for the run in flight ends
        # with it: either way no caller loses its answer to the handover.
        self.continuing = True
        await workflow.wait_condition(workflow.all_handlers_finished)
        await workflow.wait_condition(
            lambda: not self.buffer.unstored_keys or self.history_critical()
        )
        state = self.state.model_copy(deep=True)
        state.unstored_keys = self.buffer.unstored_keys
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

    def make_trigger(self, kind: TriggerKind, reason: str = "", **fields: Any) -> Trigger:
        trigger = Trigger(
            seq=self.state.next_trigger_seq,
            kind=kind,
            received_at=workflow.now(),
            reason=reason,
            **fields,
        )
        self.state.next_trigger_seq += 1
        return trigger

    def accepted(
        self, signal: str, refusal: Refusal | None, raw: Any, *, notify: bool = True
    ) -> None:
        """Count a trigger the buffer kept (its seq is used), or show the refusal.
        `notify=False`: the trigger cannot have moved the due time."""
        if refusal is not None:
            self.reject(signal, refusal.reason, raw)
            return
        self.state.next_trigger_seq += 1
        if notify:
            self.notify()

    def compute_due(self) -> Due | None:
        """When the next run is due: its schedule, moved later while the LLM
        spend cap holds runs."""
        return self.hold(
            next_due(
                firsts=self.buffer.firsts,
                wakes=self.state.wakes,
                config=self.state.config,
                heartbeat_from=self.heartbeat_from,
            )
        )

    def notify(self) -> None:
        """Wake the loop only if the due time moved (or a reset is pending)."""
        if self.current_run is not None:
            return  # the loop is awaiting a run; it recomputes afterwards
        if self.state.reset_reason is not None or self.compute_due() != self.due:
            self.changed = True

    def valid(self, parsed: Parsed[_M], signal: str, raw: Any) -> _M | None:
        if parsed.value is None:
            self.reject(signal, parsed.error, raw)
        return parsed.value

    def reject(self, signal: str, error: str, raw: Any) -> None:
        state = self.state
        state.rejected_total += 1
        # A flood of refusals must not become a flood of log lines.
        if state.rejected_total <= _LOGGED_REJECTIONS or state.rejected_total % 1000 == 0:
            workflow.logger.warning(
                "rejected %s (%d so far): %s", signal, state.rejected_total, error
            )
        state.rejected = [
            *state.rejected[-(_MAX_REJECTED - 1) :],
            RejectedInput(
                at=workflow.now(), signal=signal[:100], error=error, preview=payload_preview(raw)
            ),
        ]

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
