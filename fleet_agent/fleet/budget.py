"""The daily budget, enforced at the create tool (`daily_budget_usd`).

A create is refused when what was spent today (UTC) plus what the fleet would
cost until midnight UTC at its current $/hour, with the offer added, would
exceed the budget. The refusal gives the model the figures.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_agent.models import SpendSummary

__all__ = ["budget_refusal", "hours_to_midnight"]


def hours_to_midnight(now: datetime) -> float:
    """Hours from `now` to the next midnight UTC (24 at midnight itself)."""
    now = now.astimezone(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    return (midnight - now).total_seconds() / 3600.0


def budget_refusal(spend: SpendSummary, offer_dph: float, budget_usd: float) -> str | None:
    """Why renting an offer of `offer_dph` would break the daily budget, or None.

    `spend` must be fresh: accrued up to its `as_of`, which is taken as now.
    """
    hours = hours_to_midnight(spend.as_of)
    fleet_dph = spend.current_dph
    projected = spend.today_usd + (fleet_dph + offer_dph) * hours
    if projected <= budget_usd:
        return None
    return (
        f"Refused by the daily budget: ${spend.today_usd:.2f} spent today (UTC) plus "
        f"(fleet ${fleet_dph:.3f}/h + this offer ${offer_dph:.3f}/h) × {hours:.2f} h until "
        f"midnight UTC = ${projected:.2f}, over daily_budget_usd=${budget_usd:.2f}. "
        "Nothing was rented. A cheaper offer may fit; otherwise the fleet must wait for "
        "the next UTC day or the operator must raise the budget."
    )
