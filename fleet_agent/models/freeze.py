"""The kill switch: the `freeze` and `unfreeze` updates and what they answer.

A freeze stops the spending decisions: no runs, no monitor triggers, every
mutating tool call refused; with `destroy_all` it also destroys every machine
carrying the agent's label and checks at vast.ai that they are gone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from fleet_agent.wire import Wire

from .base import Strict

__all__ = [
    "FreezeInfo",
    "FreezeReport",
    "FreezeRequest",
    "StopFleetReport",
    "StopFleetRequest",
    "UnfreezeRequest",
]

_Reason = Annotated[str, Field(max_length=500)]
_Author = Annotated[str, Field(min_length=1, max_length=100)]


class FreezeRequest(Strict):
    """`freeze`: `{"reason", "destroy_all", "author"}`, every field optional."""

    reason: _Reason = ""
    destroy_all: bool = False
    author: _Author = "operator"


class UnfreezeRequest(Strict):
    """`unfreeze`: `{"reason", "author"}`, every field optional."""

    reason: _Reason = ""
    author: _Author = "operator"


class FreezeInfo(Wire):
    """Who froze the agent, why and when (shown by `status`)."""

    reason: str
    author: str
    at: datetime
    destroy_all: bool = False


class StopFleetRequest(Wire):
    """`stop_fleet`: this agent's machines, destroyed when `destroy_all`."""

    agent_id: str
    destroy_all: bool = False


class StopFleetReport(Wire):
    """What `stop_fleet` found and did at vast.ai."""

    instances: list[int] = Field(default_factory=list)  # this agent's, before
    destroyed: list[int] = Field(default_factory=list)
    fleet_dph: float = 0.0  # what the fleet cost per hour before
    dph_stopped: float = 0.0  # what no longer bills


class FreezeReport(Wire):
    """The `freeze` update's answer."""

    frozen: bool
    already_frozen: bool = False
    info: FreezeInfo
    fleet: StopFleetReport | None = None
    #: Why the fleet could not be read or destroyed; the agent stays frozen.
    error: str = ""
