"""The agent's two paces: demand target changes per hour and LLM dollars per hour.

`FleetAgentWorkflow` keeps, in its durable state, when it applied each of
the last hour's demand target changes and the change it holds back past
`max_demand_changes_per_hour` (`HeldDemandChange`), and what each of the
last hour's runs cost (`SpendMark`), which holds runs back past
`max_llm_usd_per_hour`. The rules are fleet_agent/loop/pace.py; `status`
shows both as `demand_pace` and `llm_spend` (docs/OPERATIONS.md, "Demand
mode" and "The limits on spending").
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from fleet_agent.wire import Wire

from .signals import DemandTargetChange

__all__ = ["DemandPace", "HeldDemandChange", "LlmSpendPace", "SpendMark"]

_Usd = Annotated[float, Field(ge=0, le=1_000_000)]


class SpendMark(Wire):
    """What the LLM cost at `at` (a run's rounds, counted when it ended)."""

    at: datetime
    usd: _Usd


class HeldDemandChange(Wire):
    """The monitor's latest target, held back past `max_demand_changes_per_hour`
    since `since` (the first change held in a row: a newer one replaces the
    change, not the time)."""

    change: DemandTargetChange
    since: datetime


class DemandPace(Wire):
    """`status.demand_pace`: demand target changes applied in the last hour,
    the most allowed, and the change held back (with when it may apply)."""

    max_per_hour: int
    changes_last_hour: int
    held: HeldDemandChange | None = None
    release_at: datetime | None = None


class LlmSpendPace(Wire):
    """`status.llm_spend`: what the runs that ended in the last hour cost, the
    cap, and while runs are held: since when and until when."""

    cap_usd: float
    last_hour_usd: float
    held_since: datetime | None = None
    held_until: datetime | None = None
