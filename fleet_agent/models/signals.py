"""Payloads of the agent's signals, as operators and the monitor send them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from .base import Strict

# Letters, digits and `._:-`: safe inside the JSON the store searches.
MESSAGE_ID_PATTERN = r"^[A-Za-z0-9._:-]*$"

__all__ = [
    "MESSAGE_ID_PATTERN",
    "CancelWake",
    "HumanMessage",
    "ResetSession",
    "StateChanged",
    "TriggerNow",
]


class HumanMessage(Strict):
    """`human_message` signal: the operator talks to the agent (P0)."""

    text: Annotated[str, Field(min_length=1, max_length=20_000)]
    author: Annotated[str, Field(min_length=1, max_length=200)] = "operator"
    # Chosen by the sender (starter/answers.py) and carried into the trigger
    # the run records, so the sender can find the run that answered it.
    message_id: Annotated[str, Field(max_length=64, pattern=MESSAGE_ID_PATTERN)] = ""

    @model_validator(mode="after")
    def _not_blank(self) -> HumanMessage:
        if not self.text.strip():
            raise ValueError("text must not be blank")
        return self


class StateChanged(Strict):
    """`state_changed` signal: an instance moved between states (P1)."""

    instance_id: Annotated[str, Field(min_length=1, max_length=200)]
    old_state: str | None = None
    new_state: Annotated[str, Field(min_length=1, max_length=200)]
    detail: Annotated[str, Field(max_length=2_000)] = ""


class TriggerNow(Strict):
    """`trigger_now` signal: run as soon as the P0 window allows."""

    reason: Annotated[str, Field(max_length=2_000)] = "operator asked for a run"


class ResetSession(Strict):
    """`reset_session` signal: start a new conversation after the current run."""

    reason: Annotated[str, Field(max_length=2_000)] = "operator reset"


class CancelWake(Strict):
    """`cancel_wake` signal: drop one pending wake."""

    wake_id: Annotated[str, Field(min_length=1, max_length=100)]
