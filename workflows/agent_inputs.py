"""What reaches the agent from outside: the pending triggers, and the refusals.

Every signal takes loose JSON and is parsed into a model or a visible refusal
(`status.rejected`), in O(1): a flood of them costs the workflow task little
and leaves bounded state (fleet_agent/loop/triggers.py). The workflow parses
and counts each signal once (workflows/agent.py, `_accept`),
and hands the model here.

`Intake` owns the intake's slice of the agent's state (`IntakeSlice`: the
pending triggers and their sequence numbers, the message texts not yet in
the store, the refusals). Each method that offers a trigger returns why it
was refused (None: kept, its sequence number used), and the workflow
decides what follows (a refusal shown, the loop woken). Deterministic:
workflow code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure, deterministic helpers.
    from fleet_agent.loop.inputs import payload_preview
    from fleet_agent.loop.triggers import Refusal, TriggerBuffer
    from fleet_agent.models import (
        HumanMessage,
        InboxItem,
        Priority,
        RejectedInput,
        StateChanged,
        Trigger,
        TriggerKind,
    )

__all__ = ["Intake", "IntakeSlice"]

_MAX_REJECTED = 20
_LOGGED_REJECTIONS = 10
_KNOWN_SIGNALS = (
    "human_message, state_changed, trigger_now, reset_session, cancel_wake, "
    "approval_requested, approval_closed, demand_target"
)


class IntakeSlice(Protocol):
    """The intake's slice of the durable state (fields of `AgentState`)."""

    next_trigger_seq: int
    pending_triggers: list[Trigger]
    unstored_keys: list[str]
    unstored_texts: list[InboxItem]
    rejected: list[RejectedInput]
    rejected_total: int


class Intake:
    """The pending triggers (a `TriggerBuffer` over the slice) and the refusals."""

    def __init__(self, slice_: IntakeSlice) -> None:
        self._s = slice_
        self._buffer = TriggerBuffer(
            slice_.pending_triggers, slice_.unstored_keys, slice_.unstored_texts
        )

    # ------------------------------------------------------------ offering

    def message(self, msg: HumanMessage) -> int | Refusal:
        """An operator's message (`human_message`, `ask`) for the next run:
        the sequence number of its trigger, or why it was refused."""
        seq = self._s.next_trigger_seq
        refusal = self._kept(
            self._buffer.add_message(seq, workflow.now(), msg.text, msg.author, msg.message_id)
        )
        return seq if refusal is None else refusal

    def state_change(self, change: StateChanged) -> tuple[Refusal | None, bool]:
        """A state change of an instance, and whether it may move the due time
        (a change folded into a pending one moves no debounce window)."""
        folded = self._buffer.folds_change_of(change.instance_id)
        refusal = self._buffer.add_state_change(
            self._s.next_trigger_seq,
            workflow.now(),
            instance_id=change.instance_id,
            old_state=change.old_state,
            new_state=change.new_state,
            detail=change.detail,
        )
        return self._kept(refusal), not folded

    def trigger_now(self, reason: str) -> Refusal | None:
        return self._kept(
            self._buffer.add_trigger_now(self._s.next_trigger_seq, workflow.now(), reason)
        )

    def news(self, text: str) -> None:
        """A config change the next run hears of (a `config_changed` trigger)."""
        self._buffer.add_config_change(self._s.next_trigger_seq, workflow.now(), text)
        self._s.next_trigger_seq += 1

    def internal(self, kind: TriggerKind, reason: str = "", **fields: Any) -> None:
        """A trigger of the agent's own (a start, a wake that fired)."""
        self._buffer.add_internal(self.make(kind, reason, **fields))

    def make(self, kind: TriggerKind, reason: str = "", **fields: Any) -> Trigger:
        """A trigger with the next sequence number, not kept (a heartbeat)."""
        s = self._s
        trigger = Trigger(
            seq=s.next_trigger_seq, kind=kind, received_at=workflow.now(), reason=reason, **fields
        )
        s.next_trigger_seq += 1
        return trigger

    def take(self) -> list[Trigger]:
        """Everything pending, for a run."""
        return self._buffer.take()

    def _kept(self, refusal: Refusal | None) -> Refusal | None:
        if refusal is None:
            self._s.next_trigger_seq += 1
        return refusal

    # ------------------------------------------------------------ refusals

    def reject(self, signal: str, error: str, raw: Any) -> None:
        """Show a refusal in `status.rejected` (the last 20) and count it."""
        s = self._s
        s.rejected_total += 1
        # A flood of refusals must not become a flood of log lines.
        if s.rejected_total <= _LOGGED_REJECTIONS or s.rejected_total % 1000 == 0:
            workflow.logger.warning("rejected %s (%d so far): %s", signal, s.rejected_total, error)
        s.rejected = [
            *s.rejected[-(_MAX_REJECTED - 1) :],
            RejectedInput(
                at=workflow.now(), signal=signal[:100], error=error, preview=payload_preview(raw)
            ),
        ]

    def reject_unknown(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal no handler has: refused visibly, with its payload's preview."""
        raw: Any = None
        if args:
            with contextlib.suppress(Exception):
                raw = workflow.payload_converter().from_payload(args[0].payload)
        self.reject(name, f"unknown signal {name[:100]!r} (known: {_KNOWN_SIGNALS})", raw)

    # ------------------------------------------------------------ reading

    @property
    def firsts(self) -> dict[Priority, datetime]:
        """When the oldest pending trigger of each priority arrived."""
        return self._buffer.firsts

    def shown(self) -> list[Trigger]:
        """The pending triggers as `status` shows them (message texts as previews)."""
        return self._buffer.shown()

    @property
    def bytes(self) -> int:
        return self._buffer.bytes

    @property
    def unstored_keys(self) -> list[str]:
        """Messages whose text is only in the workflow state so far."""
        return self._buffer.unstored_keys

    @property
    def unstored_bytes(self) -> int:
        return self._buffer.unstored_bytes

    def unstored_items(self) -> list[InboxItem]:
        """Texts still to store, for the `unstored_messages` query."""
        return self._buffer.unstored_items()

    def taken_unstored(self) -> list[InboxItem]:
        """Texts not stored yet of messages a run has taken, for a continue-as-new."""
        return self._buffer.taken_unstored()

    def mark_stored(self, keys: list[str]) -> None:
        """The store has these texts: keep previews only."""
        self._buffer.mark_stored(keys)
