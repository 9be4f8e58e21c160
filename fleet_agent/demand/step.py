"""One step of demand mode, pure: a reading and its history in, the
decision and the point to keep out.

The `observe_demand` activity (activities/demand.py) reads the source,
loads the history this step needs (`history_windows`), calls `decide` and
keeps the point. The clock is the reading's own `as_of`: the deadlines and
the history are in the source's time, so a worker whose clock drifts from
the source's does not misjudge them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from .forecast import MAX_DAYS, MIN_WINDOW_MINUTES, RECENT_MINUTES, forecast
from .point import DemandPoint, DemandStepRequest
from .reading import DemandReading, DemandSample
from .target import DemandDecision, demand_target

__all__ = ["decide", "history_windows"]


def history_windows(now: datetime, lead_minutes: float) -> list[tuple[datetime, datetime]]:
    """The spans of history `forecast` reads at `now`: the recent hour and,
    for each of the earlier days, the window that starts at this time of day."""
    window = timedelta(minutes=max(lead_minutes, MIN_WINDOW_MINUTES))
    spans = [(now - timedelta(minutes=RECENT_MINUTES), now)]
    for day in range(1, MAX_DAYS + 1):
        start = now - timedelta(days=day)
        spans.append((start, start + window))
    return spans


def decide(
    reading: DemandReading, history: Sequence[DemandSample], req: DemandStepRequest
) -> tuple[DemandDecision, DemandPoint]:
    """The target decision on `reading`, with `history` (the points kept
    before it) for the forecast."""
    now = reading.as_of
    # History after the reading (a source whose clock stepped back) lies
    # outside every window the forecast reads: no need to drop it here.
    samples = [*history, DemandSample.of(reading)]
    ahead = forecast(samples, now, req.policy.lead_minutes, req.events)
    decision = demand_target(
        reading,
        ahead,
        req.capacity_per_h,
        req.current_target,
        req.policy,
        now,
        req.below_since,
        req.below_peak,
    )
    point = DemandPoint(
        at=now,
        queued=reading.queued,
        in_flight=reading.in_flight,
        arrived_total=reading.arrived_total,
        done_total=reading.done_total,
        late_total=reading.late_total,
        saturated=reading.saturated,
        recent_per_h=ahead.recent_per_h,
        forecast_per_h=round(ahead.rate_per_h, 3),
        need_per_h=decision.need_per_h,
        target_per_h=decision.target_per_h,
        capacity_per_h=round(req.capacity_per_h, 3),
        at_risk=decision.at_risk,
        action=decision.action,
        reason=decision.reason[:600],
    )
    return decision, point
