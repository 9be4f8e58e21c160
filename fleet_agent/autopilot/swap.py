"""A swap: rent a smaller machine so that a settled fleet past the band can
release one it has, when no release alone brings it back.

A fleet a little past the band's top whose smallest machine is too large to
release (the fleet without it is well under the band) has no subset inside
the band, so the release rules (band.py, `cheapest_kept`) keep every machine
and the fleet stays past the band for hours (a case: bench/results/
2026-12-07-autopilot-rule-cases.md, "Swap"). A smaller rental fixes it: the
fleet with it in place of that machine is inside. The swap is made before
the break: the new machine is rented here, and the one it replaces goes by
the ordinary release rule (policy.py) once the new one proves, which also
keeps the fleet at its level while the new one loads.

Only a settled fleet swaps: every machine proving on a measurement, so the
excess is the truth and not an estimate, and no other change under way
(policy.py sets `FleetPlan.swap` only then). One offer is rented, the one
whose fleet with a subset of the releasable machines lands inside the band
at the least $/h (`swap_offers`); pure functions.

A search that finds no swap is followed by a check (`schedule_next_check`,
SWAP_CHECK_SECONDS ahead, reason SWAP_CHECK_REASON), and there is no swap
search while it is pending: a fleet past the band that the market has no
fitting offer for searched again on every run (12 an hour, each a second
model call), as a small open gap did (open_gap.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.fleet.oracle import Item, cheapest_cover_between, planning_unit
from fleet_agent.fleet.spare import BAND
from fleet_agent.policy.band import TOP_MARGIN
from fleet_agent.policy.premiums import INSIDE_BAND_PREMIUM, SPARE_PREMIUM

__all__ = ["Held", "swap_offers", "wants_swap"]


@dataclass(frozen=True)
class Held:
    """A machine the fleet keeps after a plan's releases."""

    rate: float  # expected proofs/h: measured where measured
    dph: float
    releasable: bool
    settled: bool  # proving, on a measurement


def wants_swap(held: Sequence[Held], target: float) -> bool:
    """A settled fleet over the band's top (the release rules found no subset
    inside it, or they would have released down to it)."""
    return (
        target > 0
        and bool(held)
        and all(h.settled for h in held)
        and sum(h.rate for h in held) > (1 + BAND) * target + 1e-6
    )


def swap_offers(
    offers: list[dict[str, Any]], held: Sequence[Held], target: float, hold: float
) -> list[dict[str, Any]]:
    """The offer (a search_offers row, in a list) to rent so that the fleet
    of `held` can come back inside the band by releasing what it makes
    unneeded: of the fleets made of one offer and a subset of the
    releasable machines (with every machine not releasable yet), the
    cheapest that holds `hold` and ends under the planned top, else the
    cheapest that holds the target so (a spare's set at most SPARE_PREMIUM
    dearer than the target's, as `inside_band`), costing at most
    INSIDE_BAND_PREMIUM more than the fleet now. One offer: each rental pays
    two machines through a 10-60 min load, and a swap of many is the
    rebuild three tries found dearer over a day (docs/DECISIONS.md, "No
    upgrades"). [] when none lands inside."""
    if not wants_swap(held, target):
        return []
    fixed = [h for h in held if not h.releasable]
    free = [h for h in held if h.releasable]
    pool = [o for o in offers if float(o.get("est_proofs_per_hour") or 0.0) > 0]
    if not free or not pool:
        return []
    items = [Item(key=k, cost=h.dph, rate=h.rate) for k, h in enumerate(free)]
    base = sum(h.rate for h in fixed)
    base_cost = sum(h.dph for h in fixed)
    top = (1 + BAND - TOP_MARGIN) * target - base
    unit = planning_unit(max(1.0, top))
    ceiling = (1 + INSIDE_BAND_PREMIUM) * (base_cost + sum(h.dph for h in free))
    best: dict[float, tuple[float, dict[str, Any]]] = {}  # low -> (fleet $/h, offer)
    for low in dict.fromkeys((hold - base, target - base)):
        for offer in pool:
            rate, dph = float(offer["est_proofs_per_hour"]), offer_dph(offer)
            kept = cheapest_cover_between(items, max(0.0, low - rate), top - rate, unit)
            if kept is None:
                continue
            cost = base_cost + dph + kept.cost
            if cost <= ceiling and (low not in best or cost < best[low][0]):
                best[low] = (cost, offer)
    if not best:
        return []
    first, last = best[max(best)], best[min(best)]
    chosen = last if first[0] > (1 + SPARE_PREMIUM) * last[0] else first
    return [chosen[1]]
