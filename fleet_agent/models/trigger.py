"""Triggers: the reasons for a run, buffered in the agent's state; and the
inbox items that keep operator message texts in the store."""

from __future__ import annotations

import functools
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer
from pydantic_core import PydanticUndefined

from fleet_agent.wire import Wire

__all__ = [
    "InboxItem",
    "Priority",
    "Trigger",
    "TriggerKind",
]


class Priority(StrEnum):
    P0 = "P0"  # a human is waiting: human messages, trigger_now, due wakes
    P1 = "P1"  # the fleet changed: state changes, session start/reset
    P2 = "P2"  # nothing happened: the heartbeat


class TriggerKind(StrEnum):
    HUMAN_MESSAGE = "human_message"
    STATE_CHANGED = "state_changed"
    TRIGGER_NOW = "trigger_now"
    WAKE = "wake"
    HEARTBEAT = "heartbeat"
    AGENT_STARTED = "agent_started"
    SESSION_RESET = "session_reset"
    CONFIG_CHANGED = "config_changed"


PRIORITY_OF: dict[TriggerKind, Priority] = {
    TriggerKind.HUMAN_MESSAGE: Priority.P0,
    TriggerKind.TRIGGER_NOW: Priority.P0,
    TriggerKind.WAKE: Priority.P0,
    TriggerKind.STATE_CHANGED: Priority.P1,
    TriggerKind.AGENT_STARTED: Priority.P1,
    TriggerKind.SESSION_RESET: Priority.P1,
    TriggerKind.CONFIG_CHANGED: Priority.P1,
    TriggerKind.HEARTBEAT: Priority.P2,
}


class Trigger(Wire):
    """One reason for a run, buffered in workflow state until a run consumes it.

    `seq` is unique within the agent's continue-as-new chain, so tests and
    operators can prove each trigger was handled by exactly one run. State
    changes of one instance coalesce into one trigger while they wait: the
    first old state, the last new state, `count` changes, seqs `seq` to
    `last_seq`. A human message's text moves to the store once it is there
    (`text_key`); the trigger then keeps a preview only.
    """

    seq: int
    kind: TriggerKind
    received_at: datetime
    text: str = ""
    # Non-empty: the full text of this human message is in the store's inbox
    # under this key and `text` holds only a preview; `load_context` puts the
    # full text back before the run uses or stores its triggers.
    text_key: str = ""
    author: str = ""
    # The sender's id of a human message (HumanMessage.message_id), if it gave one.
    message_id: str = ""
    instance_id: str = ""
    old_state: str | None = None
    new_state: str = ""
    detail: str = ""
    reason: str = ""
    wake_id: str = ""
    count: int = 1
    last_seq: int | None = None
    last_received_at: datetime | None = None

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Triggers fill RunInput, the continue-as-new input and the status
        # query: leave out fields at their defaults (half the bytes of a trigger).
        data: dict[str, Any] = handler(self)
        defaults = _trigger_defaults()
        return {k: v for k, v in data.items() if k not in defaults or v != defaults[k]}

    @property
    def priority(self) -> Priority:
        return PRIORITY_OF[self.kind]

    @property
    def seqs(self) -> range:
        """Every trigger seq this one stands for (several for coalesced changes)."""
        return range(self.seq, (self.last_seq or self.seq) + 1)


@functools.cache
def _trigger_defaults() -> dict[str, Any]:
    """The fields of `Trigger` that have a default, and that default."""
    return {
        name: field.default
        for name, field in Trigger.model_fields.items()
        if field.default is not PydanticUndefined
    }


class InboxItem(Wire):
    """The full text of one human message, kept in the store's inbox under `key`."""

    key: Annotated[str, Field(min_length=1, max_length=200)]
    seq: int
    author: str
    text: str
    received_at: datetime
