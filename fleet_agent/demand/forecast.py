"""The demand forecast: proofs per hour expected over the next lead time.

A machine rented now proves its first proof a lead time later (rental to
first proof), so the fleet must be sized for the demand of the next
`lead_minutes`, not for the demand of now. Simple and measurable:

- **the same hours of earlier days**: for each of up to `MAX_DAYS` earlier
  days with history, the arrival rate over the window that starts at this
  time of day and lasts the lead time (at least `MIN_WINDOW_MINUTES`, so a
  short lead is not one noisy sample); their mean is the seasonal rate;
- **the recent rate**: arrivals over the last `RECENT_MINUTES` (at least
  `MIN_RECENT_MINUTES` of history);
- **the blend**: seasonal × w + recent × (1 − w), with
  w = days / (days + `RECENT_AS_DAYS`): the recent hour counts as half a
  day of history. One earlier day: w = 0.67; two: 0.8; seven: 0.93. With
  no earlier day the recent rate alone; with neither, 0 (the backlog still
  drives the target: fleet_agent/demand/target.py);
- **operator events** (`DemandEvent`: "expect 3x from 14:00 to 16:00")
  multiply the blend when their window overlaps the next lead time, so the
  fleet is rented a lead time ahead of them; overlapping events take the
  largest multiplier, not the product.

Arrivals come from the source's `arrived_total` counter between samples; a
counter that drops restarted, and counts from 0 again. Samples taken while
the source was saturated are lower bounds: the forecast does not correct
them (the target rule raises stepwise instead).

Pure and deterministic: `now` is given (a workflow's clock).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from fleet_agent.untrusted import single_line
from fleet_agent.wire import Wire

from .reading import DemandSample

__all__ = [
    "MAX_DAYS",
    "MAX_EVENT_DAYS",
    "MIN_RECENT_MINUTES",
    "MIN_WINDOW_MINUTES",
    "RECENT_AS_DAYS",
    "RECENT_MINUTES",
    "DemandEvent",
    "EventOwner",
    "Forecast",
    "arrival_rate",
    "forecast",
]

MAX_DAYS = 7
#: The longest known event an operator may declare.
MAX_EVENT_DAYS = 7
RECENT_MINUTES = 60
MIN_RECENT_MINUTES = 30
MIN_WINDOW_MINUTES = 30
#: The weight of the recent rate, in days of history (see the module doc).
RECENT_AS_DAYS = 0.5
_HOUR = timedelta(hours=1)


EventOwner = Literal["operator", "model"]
"""Who set a known event: an operator (`fleet-agent expect`, `update_config`)
or the model (its `expect_demand` tool), which adds within its share and
never removes or displaces an operator's (fleet_agent/demand/events.py)."""


class DemandEvent(Wire):
    """A known change of demand from `start` to `end` (UTC): ×`multiplier`,
    set by `set_by` (an event without it, as every event before owners were
    kept, is an operator's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: datetime
    end: datetime
    multiplier: float = Field(gt=0, le=100, allow_inf_nan=False)
    note: str = Field("", max_length=200)
    set_by: EventOwner = "operator"

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, at: datetime) -> datetime:
        if at.tzinfo is None:
            raise ValueError("needs a UTC offset (e.g. 2026-12-06T14:00:00Z)")
        return at.astimezone(UTC)

    @field_validator("note")
    @classmethod
    def _one_line(cls, note: str) -> str:
        # It reaches the prompt and the console: one plain line.
        return single_line(note, 200)

    @model_validator(mode="after")
    def _window(self) -> Self:
        if self.end <= self.start:
            raise ValueError("an event must end after it starts")
        if self.end - self.start > timedelta(days=MAX_EVENT_DAYS):
            raise ValueError(f"an event lasts at most {MAX_EVENT_DAYS} days")
        return self

    def describe(self) -> str:
        """`x3 14:00-16:00 UTC 2026-12-06 (launch)`; `... [set by the model]`
        for the model's."""
        note = f" ({self.note})" if self.note else ""
        by = " [set by the model]" if self.set_by == "model" else ""
        return (
            f"x{self.multiplier:g} {self.start:%H:%M}-{self.end:%H:%M} UTC "
            f"{self.start:%Y-%m-%d}{note}{by}"
        )

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return self.start < end and start < self.end


class Forecast(BaseModel):
    """The forecast and its parts (proofs/h), for the decision and its reason."""

    model_config = ConfigDict(frozen=True)

    rate_per_h: float
    seasonal_per_h: float | None = None
    days: int = 0
    recent_per_h: float | None = None
    seasonal_weight: float = 0.0
    multiplier: float = 1.0
    event_note: str = ""

    def describe(self) -> str:
        """One line: how the rate was made."""
        parts = []
        if self.seasonal_per_h is not None:
            parts.append(f"{self.days} earlier day(s) {self.seasonal_per_h:.1f}/h")
        if self.recent_per_h is not None:
            parts.append(f"recent {self.recent_per_h:.1f}/h")
        text = " blended with ".join(parts) or "no history"
        if self.multiplier != 1.0:
            note = single_line(self.event_note, 60) or "an event"
            text += f", x{self.multiplier:g} for {note}"
        return f"forecast {self.rate_per_h:.1f}/h ({text})"


def arrival_rate(samples: Sequence[DemandSample], start: datetime, end: datetime) -> float | None:
    """Arrivals per hour between the samples inside [`start`, `end`], from
    the `arrived_total` counter (a drop is a restart: the new value counts);
    None when they span less than half the window (too little to say).
    `samples` sorted by time."""
    inside = [s for s in samples if start <= s.at <= end]
    if len(inside) < 2:
        return None
    span = inside[-1].at - inside[0].at
    if span <= timedelta(0) or span * 2 < end - start:
        return None
    arrived = 0
    for before, after in pairwise(inside):
        rise = after.arrived_total - before.arrived_total
        arrived += rise if rise >= 0 else after.arrived_total
    return arrived / (span / _HOUR)


def forecast(
    samples: Sequence[DemandSample],
    now: datetime,
    lead_minutes: float,
    events: Sequence[DemandEvent] = (),
) -> Forecast:
    """Proofs/h expected from `now` over the next `lead_minutes` (see the module doc)."""
    ordered = sorted(samples, key=lambda s: s.at)
    window = timedelta(minutes=max(lead_minutes, MIN_WINDOW_MINUTES))
    starts = [now - timedelta(days=day) for day in range(1, MAX_DAYS + 1)]
    daily = [r for s in starts if (r := arrival_rate(ordered, s, s + window)) is not None]
    recent_window = timedelta(minutes=RECENT_MINUTES)
    recent = arrival_rate(ordered, now - recent_window, now)
    if recent is not None:
        inside = [s.at for s in ordered if now - recent_window <= s.at <= now]
        if inside[-1] - inside[0] < timedelta(minutes=MIN_RECENT_MINUTES):
            recent = None
    seasonal = sum(daily) / len(daily) if daily else None
    if seasonal is not None and recent is not None:
        weight = len(daily) / (len(daily) + RECENT_AS_DAYS)
        base = seasonal * weight + recent * (1 - weight)
    elif seasonal is not None:
        weight, base = 1.0, seasonal
    else:
        weight, base = 0.0, recent or 0.0
    ahead = now + timedelta(minutes=lead_minutes)
    hits = [e for e in events if e.overlaps(now, max(ahead, now + timedelta(minutes=1)))]
    top = max(hits, key=lambda e: e.multiplier) if hits else None
    multiplier = top.multiplier if top else 1.0
    return Forecast(
        rate_per_h=base * multiplier,
        seasonal_per_h=seasonal,
        days=len(daily),
        recent_per_h=recent,
        seasonal_weight=weight,
        multiplier=multiplier,
        event_note=top.note if top else "",
    )
