"""One step of demand mode as it is kept: what the source said, what the
forecast and the rule made of it (`DemandPoint`), and what the monitor asks
and gets back (`DemandStepRequest`, `DemandStepResult`).

The store keeps one point per reading (fleet_agent/store/demand_history.py):
it is the forecast's history (7 days are too many for workflow state), the
console's plot of demand beside capacity, and what `status` and the
model's context show. Pure models: no I/O.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from fleet_agent.wire import Wire

from .forecast import DemandEvent
from .target import DemandDecision, DemandPolicy

__all__ = ["DemandPoint", "DemandStepRequest", "DemandStepResult"]


class DemandPoint(Wire):
    """A reading and the decision taken on it (proofs/h unless said)."""

    model_config = ConfigDict(frozen=True)

    at: datetime
    queued: int = 0
    in_flight: int = 0
    arrived_total: int = 0
    done_total: int = 0
    late_total: int = 0
    saturated: bool = False
    #: Arrivals per hour over the last hour (None: too little history).
    recent_per_h: float | None = None
    forecast_per_h: float = 0.0
    need_per_h: float = 0.0
    target_per_h: float = 0.0
    capacity_per_h: float = 0.0
    at_risk: int = 0
    action: Literal["raise", "lower", "hold"] = "hold"
    reason: str = Field("", max_length=600)

    @property
    def backlog(self) -> int:
        return self.queued + self.in_flight

    def line(self) -> str:
        """One line for `status`, the console and the model's context."""
        sat = " (source saturated: a lower bound)" if self.saturated else ""
        recent = f"{self.recent_per_h:.0f}/h" if self.recent_per_h is not None else "n/a"
        return (
            f"arriving {recent}{sat}, backlog {self.backlog} ({self.queued} queued, "
            f"{self.in_flight} in flight), forecast {self.forecast_per_h:.0f}/h, "
            f"need {self.need_per_h:.0f}/h, target {self.target_per_h:.0f}/h, "
            f"capacity {self.capacity_per_h:.0f}/h"
        )


class DemandStepRequest(Wire):
    """`observe_demand`: read, keep, forecast and decide for one agent.
    `below_since` and `below_peak` are those of the last decision."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    capacity_per_h: float = Field(ge=0)
    current_target: float = Field(ge=0)
    policy: DemandPolicy
    events: list[DemandEvent] = Field(default_factory=list, max_length=20)
    below_since: datetime | None = None
    below_peak: float = 0.0


class DemandStepResult(Wire):
    """The decision, or why there is none (no reading: the target holds)."""

    model_config = ConfigDict(frozen=True)

    source: str = "none"
    refusal: str = ""
    decision: DemandDecision | None = None
    point: DemandPoint | None = None

    @property
    def summary(self) -> str:
        if self.decision is None:
            return f"demand ({self.source}): no reading: {self.refusal}"
        return f"demand ({self.source}): {self.decision.reason}"
