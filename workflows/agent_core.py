"""The agent workflow's state and the rules every part of it shares.

`AgentCore` holds what one execution of `FleetAgentWorkflow` keeps: the
durable `AgentState` (handed whole to continue-as-new), the trigger buffer
over it, and the loop's bookkeeping. The workflow class is assembled from
this core, `InputsMixin` (signals, updates, queries: workflows/agent_inputs.py)
and `RunsMixin` (runs and the store loop: workflows/agent_runs.py).
Deterministic: runs inside the workflow sandbox.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NoReturn, TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from pydantic import BaseModel

    from fleet_agent.details import agent_details
    from fleet_agent.inputs import Parsed, payload_preview
    from fleet_agent.models import (
        AgentState,
        Phase,
        RejectedInput,
        RunResult,
        Trigger,
        TriggerKind,
    )
    from fleet_agent.schedule import Due, next_due
    from fleet_agent.search_attributes import search_phase
    from fleet_agent.triggers import Refusal, TriggerBuffer
    from workflows.metrics import record_agent_state
    from workflows.search_attributes import agent_updates

__all__ = ["AgentCore"]

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


class AgentCore:
    """State and shared rules of the agent workflow (not a workflow itself)."""

    _agent_id: str
    _state: AgentState
    _buffer: TriggerBuffer
    _phase: Phase
    _current_run: int | None
    _due: Due | None
    _changed: bool
    _runs_this_execution: int
    _signals: int
    _lost: list[RunResult]
    _heartbeat_from: datetime
    _search_attributes: bool
    _upserted_phase: str | None

    # Implemented by FleetAgentWorkflow; declared here for the mixins.

    async def _continue_as_new(self, *, reset: bool) -> NoReturn:
        """Hand the state to a new execution."""
        raise NotImplementedError

    async def _ensure_monitor(self) -> None:
        """Start the fleet monitor unless it runs."""
        raise NotImplementedError

    async def _configure_monitor(self) -> None:
        """Send the monitor its part of the config."""
        raise NotImplementedError

    async def _deny_all_pending(self, author: str, reason: str) -> None:
        """Deny every pending approval (workflows/agent_approvals.py)."""
        raise NotImplementedError

    def _drop_approvals_of(self, run: int) -> None:
        """Forget the pending approvals of a run that ended."""
        raise NotImplementedError

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

    def _accepted(
        self, signal: str, refusal: Refusal | None, raw: Any, *, notify: bool = True
    ) -> None:
        """Count a trigger the buffer kept (its seq is used), or show the refusal.
        `notify=False`: the trigger cannot have moved the due time."""
        if refusal is not None:
            self._reject(signal, refusal.reason, raw)
            return
        self._state.next_trigger_seq += 1
        if notify:
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
        state = self._state
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

    def _idle_phase(self) -> Phase:
        """What the agent does while no run is due: frozen, paused or idle."""
        config = self._state.config
        if config.frozen:
            return Phase.FROZEN
        return Phase.PAUSED if config.paused else Phase.IDLE

    # ------------------------------------------------------------ Web UI

    def _show(self) -> None:
        """Current details for the Web UI: the state at a glance, in markdown."""
        workflow.set_current_details(
            agent_details(self._state, self._phase, self._current_run, self._due)
        )
        # The gauges follow what the Web UI shows (replay-safe, no command).
        record_agent_state(self._agent_id, self._state, self._phase)
        if self._search_attributes and search_phase(self._phase) != self._upserted_phase:
            # Only when the phase moves: each upsert is an event in history.
            self._upserted_phase = search_phase(self._phase)
            workflow.upsert_search_attributes(agent_updates(self._agent_id, self._phase))
