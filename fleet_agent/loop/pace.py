"""Rolling-hour paces of the agent: how many demand target changes, how many
LLM dollars.

- **Demand changes** (`max_demand_changes_per_hour`): the agent applies a
  demand target change while fewer than that many were applied in the last
  hour; past it the change waits for `next_slot`, when the oldest of the
  counted ones is an hour old.
- **LLM spend** (`max_llm_usd_per_hour`): each run's cost is a `SpendMark`
  at the run's end; no run starts while the marks of the last hour sum to
  the cap or more, until `spend_release`, when enough of them are an hour
  old. A run that starts under the cap may end over it: the cap holds the
  next run, never stops one under way.

"The last hour" at `now` is (now − 1 h, now]. Pure and deterministic: `now`
is the workflow's clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from fleet_agent.models.pace import SpendMark

__all__ = [
    "MAX_SPEND_MARKS",
    "WINDOW",
    "add_spend",
    "hour_spend",
    "in_window",
    "next_slot",
    "spend_release",
    "usd",
]

WINDOW = timedelta(hours=1)
#: The most one run's cost is taken as (the models' bound on a dollar figure).
MAX_USD = 1_000_000.0
#: Marks kept in state: past this, the two oldest are merged at the later one's
#: time (the cost stays counted a little longer, never shorter).
MAX_SPEND_MARKS = 120


def in_window(times: Sequence[datetime], now: datetime) -> list[datetime]:
    """The times of the last hour, oldest first."""
    return sorted(t for t in times if t > now - WINDOW)


def next_slot(times: Sequence[datetime], now: datetime, per_hour: int) -> datetime | None:
    """None when fewer than `per_hour` of `times` fall in the last hour (one
    more may happen now); else when enough of them are an hour old that one
    more may."""
    recent = in_window(times, now)
    if len(recent) < per_hour:
        return None
    # One more fits once len − per_hour + 1 of them have left the window.
    return recent[len(recent) - per_hour] + WINDOW


def add_spend(
    marks: Sequence[SpendMark], at: datetime, usd: float, now: datetime
) -> list[SpendMark]:
    """`marks` of the last hour with `usd` spent at `at`, at most
    `MAX_SPEND_MARKS` of them (see there)."""
    kept = sorted((m for m in marks if m.at > now - WINDOW), key=lambda m: m.at)
    kept.append(SpendMark(at=at, usd=usd))
    kept.sort(key=lambda m: m.at)
    while len(kept) > MAX_SPEND_MARKS:
        first, second = kept[0], kept[1]
        kept[:2] = [SpendMark(at=second.at, usd=first.usd + second.usd)]
    return kept


def hour_spend(marks: Sequence[SpendMark], now: datetime) -> float:
    """Dollars of the marks in the last hour."""
    return sum(m.usd for m in marks if m.at > now - WINDOW)


def spend_release(marks: Sequence[SpendMark], now: datetime, cap: float) -> datetime | None:
    """None while the last hour's spend is under `cap`; else when enough of
    its marks are an hour old that it is."""
    recent = sorted((m for m in marks if m.at > now - WINDOW), key=lambda m: m.at)
    total = sum(m.usd for m in recent)
    if total < cap:
        return None
    for mark in recent:
        total -= mark.usd
        if total < cap:
            return mark.at + WINDOW
    return recent[-1].at + WINDOW


def usd(value: object) -> float:
    """A run's cost as `record_run` returned it, as a dollar figure a model
    takes: None (an older worker's answer), a value that is not a finite
    number, or a negative one is $0; at most `MAX_USD`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    if not math.isfinite(value) or value <= 0:
        return 0.0
    return min(float(value), MAX_USD)
