"""What reaches the agent from outside: signals, and the status.

Every signal takes loose JSON and is parsed into a model or a visible refusal
(`status.rejected`), in O(1): a flood of them costs the workflow task little
and leaves bounded state (fleet_agent/loop/triggers.py). A signal with an unknown
name is recorded too. The update's validator refuses bad values before they
reach history (the config's own logic: workflows/agent_config.py). The
handlers are declared on the workflow (workflows/agent.py); `Intake` holds
what they do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from fleet_agent.loop.inputs import parse_payload
    from fleet_agent.loop.wakes import cancel_wake as remove_wake
    from fleet_agent.models import (
        AgentStatus,
        AskRequest,
        CancelWake,
        HumanMessage,
        ResetSession,
        StateChanged,
        TriggerNow,
    )
    from workflows.agent_monitor import MonitorLink
    from workflows.agent_pace import DemandPacer, LlmBudget
    from workflows.agent_state import AgentExecution

__all__ = ["Intake"]

_KNOWN_SIGNALS = (
    "human_message, state_changed, trigger_now, reset_session, cancel_wake, "
    "approval_requested, approval_closed, demand_target"
)


class Intake:
    """Signals, the config update and the status, on the execution's state."""

    def __init__(
        self, ex: AgentExecution, monitor: MonitorLink, pacer: DemandPacer, budget: LlmBudget
    ) -> None:
        self._ex = ex
        self._monitor = monitor
        self._pacer = pacer
        self._budget = budget

    # ------------------------------------------------------------ signals

    def human_message(self, raw: Any) -> None:
        ex = self._ex
        ex.signals += 1
        msg = ex.valid(parse_payload(HumanMessage, raw, bare="text"), "human_message", raw)
        if msg is not None:
            self.take_message(msg, "human_message", raw)

    def take_message(self, msg: HumanMessage, name: str, raw: Any) -> int | str:
        """Take an operator's message for the next run, as `human_message`
        and `ask` both do: the seq of its trigger, or why it was refused
        (shown in status.rejected under `name`)."""
        ex = self._ex
        seq = ex.state.next_trigger_seq
        refusal = ex.buffer.add_message(seq, workflow.now(), msg.text, msg.author, msg.message_id)
        ex.accepted(name, refusal, raw)
        return seq if refusal is None else refusal.reason

    def ask(self, raw: Any) -> AskRequest | str:
        """The `ask` update's request, counted as a `human_message` is, or why
        no run would answer it now (frozen, paused: shown in status.rejected).
        A malformed one was refused by `validate_ask` before history."""
        ex = self._ex
        ex.signals += 1
        req = parse_payload(AskRequest, raw, bare="text").value
        if req is None:
            # Only a replay of an update accepted by older code gets here.
            raise ApplicationError("invalid message", non_retryable=True)
        config = ex.state.config
        reason = ""
        if config.frozen:
            why = f" ({ex.state.freeze.reason})" if ex.state.freeze else ""
            reason = (
                f"the agent is frozen{why}: no run starts until `fleet-agent unfreeze`; "
                "the message was not taken"
            )
        elif config.paused:
            reason = (
                "the agent is paused: no run answers until `fleet-agent config --set "
                "paused=false`; the message was not taken (`fleet-agent say` leaves it "
                "for the next run)"
            )
        if reason:
            ex.reject("ask", reason, raw)
            return reason
        return req

    def validate_ask(self, raw: Any) -> None:
        """Refuse a malformed `ask` before it reaches history."""
        parsed = parse_payload(AskRequest, raw, bare="text")
        if parsed.value is None:
            raise ValueError(f"invalid message: {parsed.error}")

    def state_changed(self, raw: Any) -> None:
        ex = self._ex
        ex.signals += 1
        change = ex.valid(parse_payload(StateChanged, raw), "state_changed", raw)
        if change is not None:
            folded = ex.buffer.folds_change_of(change.instance_id)
            refusal = ex.buffer.add_state_change(
                ex.state.next_trigger_seq,
                workflow.now(),
                instance_id=change.instance_id,
                old_state=change.old_state,
                new_state=change.new_state,
                detail=change.detail,
            )
            # A folded change moves no debounce window: the due time stands,
            # and a flood skips recomputing it for every signal.
            ex.accepted("state_changed", refusal, raw, notify=not folded)

    def trigger_now(self, raw: Any) -> None:
        ex = self._ex
        ex.signals += 1
        req = ex.valid(
            parse_payload(TriggerNow, raw, bare="reason", optional=True), "trigger_now", raw
        )
        if req is not None:
            refusal = ex.buffer.add_trigger_now(
                ex.state.next_trigger_seq, workflow.now(), req.reason
            )
            ex.accepted("trigger_now", refusal, raw)

    def reset_session(self, raw: Any) -> None:
        ex = self._ex
        ex.signals += 1
        req = ex.valid(
            parse_payload(ResetSession, raw, bare="reason", optional=True), "reset_session", raw
        )
        if req is not None:
            ex.state.reset_reason = req.reason
            ex.changed = True

    def cancel_wake(self, raw: Any) -> None:
        ex = self._ex
        ex.signals += 1
        req = ex.valid(parse_payload(CancelWake, raw, bare="wake_id"), "cancel_wake", raw)
        if req is None:
            return
        ex.state.wakes, existed = remove_wake(ex.state.wakes, req.wake_id)
        if not existed:
            ex.reject("cancel_wake", f"no pending wake {req.wake_id!r}", raw)
        ex.notify()

    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Any other signal name: recorded in status.rejected, never silently lost."""
        ex = self._ex
        ex.signals += 1
        raw: Any = None
        if args:
            with contextlib.suppress(Exception):
                raw = workflow.payload_converter().from_payload(args[0].payload)
        ex.reject(name, f"unknown signal {name[:100]!r} (known: {_KNOWN_SIGNALS})", raw)

    # ------------------------------------------------------------ query

    def status(self) -> AgentStatus:
        """What the agent is doing now (contract: see docs/ARCHITECTURE.md)."""
        ex = self._ex
        state = ex.state
        info = workflow.info()
        heartbeat = (
            None
            if state.config.paused
            else ex.heartbeat_from + timedelta(seconds=state.config.heartbeat_seconds)
        )
        return AgentStatus(
            agent_id=ex.agent_id,
            session=state.session,
            run_count=state.run_count,
            phase=ex.phase,
            current_run=ex.current_run,
            pending_triggers=ex.buffer.shown(),
            next_heartbeat_at=heartbeat,
            next_run_due_at=None if ex.due is None else ex.due.at,
            wakes=state.wakes,
            last_run=state.last_run,
            config=state.config,
            rejected=state.rejected,
            rejected_total=state.rejected_total,
            executions=state.executions,
            history_length=info.get_current_history_length(),
            history_bytes=info.get_current_history_size(),
            pending_bytes=ex.buffer.bytes,
            unstored_messages=len(ex.buffer.unstored_keys),
            frozen=state.freeze,
            pending_approvals=state.pending_approvals,
            spend=state.spend,
            llm_cost=state.llm_cost,
            restarted=state.restarted,
            notify_failures=state.notify.failures,
            notify_delivered=state.notify.delivered,
            demand=state.demand,
            demand_pace=self._pacer.status(state.config),
            llm_spend=self._budget.status(state.config),
        )
