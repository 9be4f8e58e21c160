"""Payloads of the agent's signals, as operators and the monitor send them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from fleet_agent.demand.point import DemandPoint
from fleet_agent.wire import Wire

from .base import Strict

#: The monitor's signal to its agent in demand mode (workflows/monitor_demand.py).
DEMAND_TARGET = "demand_target"

# Letters, digits and `._:-`: safe inside the JSON the store searches.
MESSAGE_ID_PATTERN = r"^[A-Za-z0-9._:-]*$"

__all__ = [
    "DEMAND_TARGET",
    "MESSAGE_ID_PATTERN",
    "CancelWake",
    "DemandTargetChange",
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


class DemandTargetChange(Wire):
    """`demand_target` signal, from the agent's own monitor in demand mode:
    hold `target_per_h` from now (fleet_agent/demand/target.py decided it on
    `point`). Not `Strict`: its times cross JSON as text. Unknown fields and
    values out of bounds are still refused (status.rejected)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    target_per_h: Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)]
    previous_per_h: Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)] = 0.0
    action: Literal["raise", "lower", "hold"]
    reason: Annotated[str, Field(max_length=600)] = ""
    point: DemandPoint | None = None
