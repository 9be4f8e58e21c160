"""The target rule of demand mode: proofs/h the fleet should hold now.

`demand_target` turns a reading, the forecast and the fleet's capacity into
a target, in four steps:

1. **Need.** need = (forecast + backlog rate) × (1 + headroom).
   - The forecast (fleet_agent/demand/forecast.py) is the arrival rate over
     the next lead time: what a machine rented now meets when it proves.
   - The backlog rate is what clears the work already there (queued and in
     flight) before its deadlines. Until the lead time has passed only the
     machines running now prove, and their capacity left over after new
     arrivals (free = capacity − forecast, not below 0) works the backlog;
     after it, the target does. The k-th item by deadline, due in h hours,
     is on time when free × L + (target − forecast) × (h − L) ≥ k (L the
     lead time), so the backlog rate is the largest (k − free × L) / (h − L).
     An item due before the lead time is out (h ≤ L) is beyond what renting
     can do: it counts as at risk, not in the rate. h − L is taken as at
     least `MIN_GAP_MINUTES`, so one item due right after the lead time
     does not ask for an unbounded rate. Items without a deadline are
     taken as due `default_deadline_minutes` from now (30 by default:
     shorter than Curio's 45, documentation/en/experimental-features/
     Snark-Market.md, since such an item may have waited already).
2. **Censoring.** A saturated source (Curio pulls work only up to its
   queue's high-water mark, 8 items: tasks/proofshare/task_request.go,
   RequestQueueHighWaterMark) shows at most what it took, not what the
   market offered: the observed rate is a lower bound. The need is then at
   least the current target raised by `saturated_step` (a fraction, at
   least 1 proof/h), once the fleet holds its current target (capacity ≥
   `HELD_SHARE` of it): one step per step of capacity, not one per
   reading, so a source that stays saturated while machines load does not
   run the target up to `max_target`. Nor does it step while GPUs that
   prove outnumber the rows in flight (`gpus_proving`, when the caller
   knows it, and the source listed every open item): rows then wait for
   the node, not for a machine. Curio's
   prove task gives one row a task every 10 s (tasks/proofshare/
   task_prove.go), and the request task takes up to 8 rows at once, so
   a batch waits past the low-water mark however large the fleet.
3. **Clamp** to [`min_target`, `max_target`].
4. **Hysteresis.** A need above the current target by more than
   `raise_margin` raises it at once (missing deadlines costs the work;
   the margin, well inside the headroom, keeps a need that creeps up
   reading by reading from moving the target, and so running the agent,
   at every poll). A need below target × (1 −
   `hysteresis`) lowers it only once every need since has stayed below that
   line for `lower_after_minutes`, and then to the highest need of that
   stretch, so a dip or noisy readings do not release machines that are
   rented again an hour later. Between the two lines the target holds.

The caller keeps `below_since` and `below_peak` of the last decision and
passes them back. Pure and deterministic: `now` is given.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal, Self

from pydantic import ConfigDict, Field, model_validator

from fleet_agent.wire import Wire

from .forecast import Forecast
from .reading import DemandReading

__all__ = [
    "BUSY_SHARE",
    "HELD_SHARE",
    "MIN_GAP_MINUTES",
    "DemandDecision",
    "DemandPolicy",
    "backlog_rate",
    "demand_target",
]

#: The share of its target the fleet must hold before a saturated source steps it again.
HELD_SHARE = 0.9
#: The share of the fleet's capacity the last hour's arrivals must reach
#: before a saturated source steps the target (module doc). Under 1: the
#: capacity model may credit a machine more than it proves.
BUSY_SHARE = 0.9
#: The shortest time after the lead time that an item's rate is spread over.
MIN_GAP_MINUTES = 5.0
_HOUR = timedelta(hours=1)


class DemandPolicy(Wire):
    """The knobs of the rule (proofs/h, fractions, minutes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_target: float = Field(0.0, ge=0, allow_inf_nan=False)
    max_target: float = Field(gt=0, allow_inf_nan=False)
    headroom: float = Field(0.2, ge=0, le=5, allow_inf_nan=False)
    hysteresis: float = Field(0.15, ge=0, lt=1, allow_inf_nan=False)
    raise_margin: float = Field(0.05, ge=0, le=1, allow_inf_nan=False)
    lower_after_minutes: float = Field(30.0, ge=0, allow_inf_nan=False)
    saturated_step: float = Field(0.25, gt=0, le=5, allow_inf_nan=False)
    #: Rental to first proof.
    lead_minutes: float = Field(20.0, ge=0, le=24 * 60, allow_inf_nan=False)
    default_deadline_minutes: float = Field(30.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min_target > self.max_target:
            raise ValueError("min_target must not exceed max_target")
        return self


class DemandDecision(Wire):
    """A target and the figures it came from (proofs/h unless said)."""

    model_config = ConfigDict(frozen=True)

    target_per_h: float
    action: Literal["raise", "lower", "hold"]
    need_per_h: float
    forecast_per_h: float
    backlog_per_h: float
    backlog: int
    #: Items due before new machines could prove them that the fleet running
    #: now will not finish in time.
    at_risk: int
    capacity_per_h: float
    saturated: bool
    #: Since when the need has stayed below the lowering line (None: it is
    #: not), and the highest need since: the caller passes both back.
    below_since: datetime | None = None
    below_peak: float = 0.0
    reason: str


def backlog_rate(
    reading: DemandReading,
    now: datetime,
    capacity_per_h: float,
    forecast_per_h: float,
    policy: DemandPolicy,
) -> tuple[float, int]:
    """(proofs/h beyond the forecast that clear the backlog on time, items
    at risk): step 1 of the module doc."""
    lead_h = policy.lead_minutes / 60
    free = max(capacity_per_h - forecast_per_h, 0.0)
    due = list(reading.deadlines[: reading.backlog])
    unknown = reading.backlog - len(due)
    if unknown > 0:
        due += [now + timedelta(minutes=policy.default_deadline_minutes)] * unknown
    due.sort()
    rate, at_risk = 0.0, 0
    for k, deadline in enumerate(due, start=1):
        hours = (deadline - now) / _HOUR
        if hours <= lead_h:
            if free * max(hours, 0.0) < k:
                at_risk += 1
            continue
        gap = max(hours - lead_h, MIN_GAP_MINUTES / 60)
        rate = max(rate, (k - free * lead_h) / gap)
    return rate, at_risk


def demand_target(
    reading: DemandReading,
    forecast: Forecast,
    capacity_per_h: float,
    current_target: float,
    policy: DemandPolicy,
    now: datetime,
    below_since: datetime | None = None,
    below_peak: float = 0.0,
) -> DemandDecision:
    """The target for now (see the module doc) with a one-line reason."""
    capacity = max(capacity_per_h, 0.0)
    extra, at_risk = backlog_rate(reading, now, capacity, forecast.rate_per_h, policy)
    need = (forecast.rate_per_h + extra) * (1 + policy.headroom)
    why = f"{forecast.describe()}; backlog {reading.backlog}"
    if extra > 0:
        why += f" needs +{extra:.1f}/h by its deadlines"
    if at_risk:
        why += f", {at_risk} due before new machines could prove"
    recent = forecast.recent_per_h
    busy = recent is None or recent >= capacity * BUSY_SHARE
    if reading.saturated and capacity < current_target * HELD_SHARE:
        why += "; source saturated: next step once the fleet holds its target"
    elif reading.saturated and not busy:
        why += (
            f"; source saturated, but the last hour's {recent or 0:.1f}/h is under "
            f"{BUSY_SHARE:.0%} of the fleet's {capacity:.1f}/h: "
            "the work waits for the node, no step"
        )
    elif reading.saturated:
        stepped = current_target + max(1.0, current_target * policy.saturated_step)
        if stepped > need:
            need = stepped
            why += f"; source saturated (demand is a lower bound): step to {need:.1f}/h"
    clamped = min(max(need, policy.min_target), policy.max_target)
    figures = {
        "need_per_h": round(need, 3),
        "forecast_per_h": round(forecast.rate_per_h, 3),
        "backlog_per_h": round(extra, 3),
        "backlog": reading.backlog,
        "at_risk": at_risk,
        "capacity_per_h": capacity,
        "saturated": reading.saturated,
    }
    lowest = policy.min_target
    current = min(max(current_target, lowest), policy.max_target)
    if clamped > current * (1 + policy.raise_margin) or (clamped > current and current <= 0):
        cap = " (max_target)" if clamped < need else ""
        return DemandDecision(
            target_per_h=round(clamped, 2),
            action="raise",
            reason=f"raise to {clamped:.1f}/h{cap}: need {need:.1f}/h; {why}",
            **figures,
        )
    if current != current_target:
        return DemandDecision(
            target_per_h=current,
            action="raise" if current > current_target else "lower",
            reason=f"target {current_target:g} outside [{lowest:g}, {policy.max_target:g}]: "
            f"{current:g}/h; {why}",
            **figures,
        )
    line = current * (1 - policy.hysteresis)
    if clamped >= line:
        return DemandDecision(
            target_per_h=current,
            action="hold",
            reason=f"hold {current:.1f}/h: need {need:.1f}/h; {why}",
            **figures,
        )
    since = below_since or now
    peak = max(below_peak if below_since else 0.0, clamped)
    waited = (now - since).total_seconds() / 60
    if waited >= policy.lower_after_minutes:
        return DemandDecision(
            target_per_h=round(peak, 2),
            action="lower",
            reason=f"lower to {peak:.1f}/h: need below {line:.1f}/h for {waited:.0f} min; {why}",
            **figures,
        )
    return DemandDecision(
        target_per_h=current,
        action="hold",
        below_since=since,
        below_peak=peak,
        reason=f"hold {current:.1f}/h: need {need:.1f}/h below {line:.1f}/h for "
        f"{waited:.0f} of {policy.lower_after_minutes:g} min; {why}",
        **figures,
    )
