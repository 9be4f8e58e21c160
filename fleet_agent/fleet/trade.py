"""A trade: rent a much cheaper machine of about the same size as a dear one
the fleet has, so that the dear one can go once the new one proves.

A failure is replaced at the market of its hour, and right after a cover
took the cheapest offers that market is dearer: seed 1's market day
replaced two machines that died while loading, at hour 18, with 27-proof
machines at $11.7-12.3 per 1,000 proofs, against the $8.1 of the fleet the
oracle chose, and kept them all day. The rebuilds tried before (whole
fleets, or one offer whenever the fleet's $/h fell 5 %) bought cheaper
fleets of larger machines, whose failures the spare covers less often, and
lost the band (docs/DECISIONS.md, "A swap for cost too"). A trade keeps the
fleet's shape: one offer for one machine, no larger than the machine it
replaces or than the largest the spare covers, the spare's level not
raised, and only for a large saving on that machine (TRADE_SAVING), which
pays for the new one's load within hours.

As with a swap (swap.py), the trade is made before the break: the offer is
rented here, and the ordinary release rule (policy.py) lets the dear machine
go once the new one proves. Only a settled fleet inside the band trades
(policy.py sets `FleetPlan.trade` only then), one machine at a time: the
new one loading unsettles the fleet. Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet_agent.fleet.band import TOP_MARGIN
from fleet_agent.fleet.spare import BAND, SPARE_MAX, hold_level
from fleet_agent.fleet.swap import Held

__all__ = [
    "TRADE_CHECK_REASON",
    "TRADE_CHECK_SECONDS",
    "TRADE_SAVING",
    "TRADE_SURE_SHARE",
    "trade_offers",
]

#: How much cheaper per hour the new machine must be than the one it
#: replaces, a share of the old one's $/h. The new one is paid through its
#: 10-60 min load beside the old one, and a seventh of boots fail: at a
#: quarter the saving pays that back in about two hours.
TRADE_SAVING = 0.25
#: The share of an offer's estimate counted on for the level: the release
#: rule counts an unmeasured machine so (policy.py, UNMEASURED_SHARE), and
#: a trade whose new machine does not let the old one go costs both.
TRADE_SURE_SHARE = 0.9
#: How often a settled fleet looks for a trade: one search, then a check
#: scheduled this far ahead, and no search while that check is pending. A
#: search on every run of a settled fleet was a second model call on each
#: (a tool round trip), 12 an hour, for a trade found a few times a day.
TRADE_CHECK_SECONDS = 1800
#: That check's reason, as the run's pending wakes show it.
TRADE_CHECK_REASON = "look for a trade"


def trade_offers(
    offers: list[dict[str, Any]],
    held: Sequence[Held],
    target: float,
    *,
    spare: bool,
) -> list[dict[str, Any]]:
    """The offer (a search_offers row, in a list) to rent for the trade that
    saves the most $/h: one releasable machine of `held` replaced by an offer
    at least TRADE_SAVING cheaper per hour, no larger than that machine or
    than the largest machine the spare covers, such that the fleet with the
    offer instead of the machine holds its level (the offer at
    TRADE_SURE_SHARE of its estimate) with the level not raised, and ends
    under the planned top. [] when no trade fits, or `held` is not a settled
    fleet inside the band."""
    if target <= 0 or not held or not all(h.settled for h in held):
        return []
    rates = [h.rate for h in held]
    total = sum(rates)
    level = hold_level(target, rates, spare=spare)
    top = (1 + BAND - TOP_MARGIN) * target
    if not level - 1e-6 <= total <= (1 + BAND) * target + 1e-6:
        return []
    widest = (BAND + SPARE_MAX) * target
    best: tuple[float, dict[str, Any]] | None = None
    for k, old in enumerate(held):
        if not old.releasable:
            continue
        others = rates[:k] + rates[k + 1 :]
        rest = total - old.rate
        for offer in offers:
            rate, dph = float(offer.get("est_proofs_per_hour") or 0.0), float(offer["dph"])
            if not 0 < rate <= max(old.rate, widest) or dph > (1 - TRADE_SAVING) * old.dph:
                continue
            new_level = hold_level(target, [*others, rate], spare=spare)
            if (
                new_level <= level + 1e-6
                and rest + TRADE_SURE_SHARE * rate >= new_level - 1e-6
                and rest + rate <= top + 1e-6
                and (best is None or old.dph - dph > best[0])
            ):
                best = (old.dph - dph, offer)
    return [best[1]] if best is not None else []
