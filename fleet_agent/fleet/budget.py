"""The daily budget, enforced at the create tool (`daily_budget_usd`).

The budget bounds every 24 hours, not the UTC day: a create is refused when
some 24-hour window that holds the present would cost more than the budget,
counting what was spent in its past part and, for its future part, the
fleet's $/hour with the offer and the creates in flight added. The window
that starts now is the fleet running a full day at that rate, so a fleet
rented at 23:00 cannot run through the next day above the budget; a window
that started earlier also holds the spend since its start. Within a ledger
hour, spend is taken as spread evenly. The refusal gives the model the
figures of the worst window.

The rate ahead counts downloads: the offer's and the fleet's (the ledger
bills traffic only once it is counted), and machines whose rows do not
parse at `max_instance_dph` (`beyond_ledger_dph`,
fleet_agent/fleet/guardrails.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

__all__ = ["DAY", "budget_refusal", "worst_window"]

DAY = timedelta(hours=24)
_HOUR = timedelta(hours=1)


def _spent_since(hours: Sequence[tuple[datetime, float]], start: datetime, now: datetime) -> float:
    """What the ledger's `hours` (UTC hour, $) hold of [start, now]: each
    hour's spend spread over the part of it before now."""
    total = 0.0
    for hour, usd in hours:
        end = min(hour + _HOUR, now)
        span = (end - hour).total_seconds()
        if span <= 0:
            continue
        overlap = (end - max(hour, start)).total_seconds()
        if overlap > 0:
            total += usd * overlap / span
    return total


def worst_window(
    hours: Sequence[tuple[datetime, float]], now: datetime, dph: float
) -> tuple[datetime, float, float]:
    """(start, $ spent since the start, $ to come at `dph`) of the costliest
    24-hour window that holds `now`. The total is piecewise linear in the
    start, so it peaks at the window's ends or at an hour boundary."""
    now = now.astimezone(UTC)
    earliest = now - DAY
    starts = {earliest, now}
    first = earliest.replace(minute=0, second=0, microsecond=0)
    while first <= now:
        if first > earliest:
            starts.add(first)
        first += _HOUR
    best: tuple[datetime, float, float] | None = None
    for start in sorted(starts):
        spent = _spent_since(hours, start, now)
        to_come = dph * (start + DAY - now).total_seconds() / 3600.0
        if best is None or spent + to_come > best[1] + best[2]:
            best = (start, spent, to_come)
    assert best is not None
    return best


def budget_refusal(
    hours: Sequence[tuple[datetime, float]],
    now: datetime,
    *,
    fleet_dph: float,
    added_dph: float,
    budget_usd: float,
    in_flight_dph: float = 0.0,
    beyond_ledger_dph: float = 0.0,
) -> str | None:
    """Why renting `added_dph` more would break the daily budget, or None.

    `hours`: the ledger's spend per UTC hour over the last day, accrued up
    to `now`; `fleet_dph`: what the fleet bills now (the ledger's);
    `beyond_ledger_dph`: what the fleet costs beyond it (downloads, rows
    that do not parse); `in_flight_dph`: creates started and not finished.
    """
    rate = fleet_dph + beyond_ledger_dph + in_flight_dph + added_dph
    start, spent, to_come = worst_window(hours, now, rate)
    total = spent + to_come
    if total <= budget_usd:
        return None
    left = (start + DAY - now).total_seconds() / 3600.0
    flying = f" + creates in flight ${in_flight_dph:.3f}/h" if in_flight_dph else ""
    beyond = (
        f" + its downloads and unreadable rows ${beyond_ledger_dph:.3f}/h"
        if beyond_ledger_dph
        else ""
    )
    rates = f"(fleet ${fleet_dph:.3f}/h{beyond}{flying} + this offer ${added_dph:.3f}/h)"
    past = (
        f"${spent:.2f} spent since {start:%H:%M} UTC plus "
        if (now - start).total_seconds() >= 60
        else ""
    )
    return (
        f"Refused by the daily budget: over the 24 hours from {start:%Y-%m-%d %H:%M} UTC, "
        f"{past}{rates} × {left:.2f} h = ${total:.2f}, over daily_budget_usd=${budget_usd:.2f} "
        "(the budget bounds any 24 hours). Nothing was rented. A cheaper offer may fit; "
        "otherwise the fleet must wait for earlier spend to leave the 24-hour window, or "
        "the operator must raise the budget."
    )
