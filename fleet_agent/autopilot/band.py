"""The band's rules, shared by the autopilot's rentals and releases
(fleet_agent/autopilot/policy.py): how far under the target a gap may stay open,
how far under the band's top a plan ends, the cheapest set that lands inside
the band (and what a spare may cost there), and the subset of a fleet a
release keeps. Pure functions.
"""

from __future__ import annotations

from typing import Any

from fleet_agent.fleet.oracle import (
    Cover,
    Item,
    cheapest_cover,
    cheapest_cover_between,
    planning_unit,
)
from fleet_agent.fleet.spare import BAND, cheapest_spared_cover, hold_level
from fleet_agent.policy.band import SMALL_GAP, TOP_MARGIN
from fleet_agent.policy.premiums import INSIDE_BAND_PREMIUM, SPARE_PREMIUM

__all__ = ["cheapest_kept", "inside_band"]


def inside_band(
    items: list[Item],
    lows: tuple[float, ...],
    high: float,
    cheapest: Cover,
    *,
    target_low: float | None = None,
    base_cost: float = 0.0,
) -> tuple[Cover, float] | None:
    """The cheapest set that lands between a low of `lows` (tried in order:
    the level, the target, then for a release the target less SMALL_GAP)
    and `high`, with the low it holds, if it
    costs at most INSIDE_BAND_PREMIUM more than `cheapest` (which ends past
    `high`). Shared by rentals (`choose_offers`) and releases
    (`cheapest_kept`): a fleet past the band is rarely brought back.

    A low above `target_low` (a level with a spare) is held only while the
    fleet with its set costs at most SPARE_PREMIUM more than the fleet with
    the set that holds `target_low` (`base_cost`: the $/h of the machines
    the fleet keeps besides the set). Inside a band this narrow the spare's
    set can cost far more than the spare's share of the capacity, for hours
    ("Spare premium" in bench/results/2026-12-07-autopilot-rule-cases.md)."""
    found: list[tuple[Cover, float]] = []
    for low in dict.fromkeys(lows):
        inside = cheapest_cover_between(items, max(0.0, low), high, planning_unit(max(1.0, high)))
        if inside is None or inside.cost > (1 + INSIDE_BAND_PREMIUM) * cheapest.cost:
            continue
        found.append((inside, low))
        if target_low is None or low <= target_low + 1e-9:
            break
    if not found:
        return None
    # Two sets only when the first holds a level above the target: the second
    # is then the target's (a set inside [level, high] is inside [target,
    # high] too, and costs at least the cheapest there).
    first, last = found[0], found[-1]
    if base_cost + first[0].cost > (1 + SPARE_PREMIUM) * (base_cost + last[0].cost):
        return last
    return first


def cheapest_kept(
    alive: list[dict[str, Any]], target: float, hold: float, *, spare: bool = False
) -> tuple[set[int], float]:
    """ids (Python's) of the rows to keep, and the level they keep: every
    machine that may not be released yet (hysteresis), plus the cheapest
    subset of the others that holds `hold` (fleet_agent/fleet/oracle.py).
    With machines of different sizes this keeps the fleet nearer the level
    than releasing the dearest per proof one by one. With `spare`, the
    cheapest subset whose joint fleet holds its own level, which is below
    `hold` when the machine that set `hold` is not kept (spare.py,
    `cheapest_spared_cover`); whatever else stays beside it, the fleet
    still holds its level (each machine adds at least what it can raise
    the level by).

    As with a cover (`choose_offers`), a subset that ends inside the band is
    kept instead of a cheaper one past it when it costs at most
    INSIDE_BAND_PREMIUM more: one holding `hold`, else one holding the
    target alone (a spare is never held past the band, nor inside it for
    more than SPARE_PREMIUM over the target's set; the level is then the
    target), else one holding the target less SMALL_GAP (no machine is
    small enough to leave the fleet between the target and the band's top;
    the gap it leaves is one `choose_offers` leaves open)."""
    fixed = [r for r in alive if not r.get("releasable", True)]
    free = [r for r in alive if r.get("releasable", True)]
    held = sum(float(r.get("expected_proofs_per_hour") or 0.0) for r in fixed)
    items = [
        Item(
            key=k,
            cost=float(r.get("dph") or 0.0),
            rate=float(r.get("expected_proofs_per_hour") or 0.0),
        )
        for k, r in enumerate(free)
    ]
    rest = max(0.0, hold - held)
    cover = cheapest_cover(items, rest, planning_unit(max(1.0, rest)))
    level = hold
    if spare:
        fixed_rates = [float(r.get("expected_proofs_per_hour") or 0.0) for r in fixed]
        joint = cheapest_spared_cover(items, target, held=fixed_rates)
        if joint.met:
            cover = joint
            level = hold_level(target, fixed_rates + [items[k].rate for k in joint.keys])
    room = (1 + BAND - TOP_MARGIN) * target - held
    if cover.rate > room:
        lows = (hold - held, target - held, (1 - SMALL_GAP) * target - held)
        inside = inside_band(
            items,
            lows,
            room,
            cover,
            target_low=target - held,
            base_cost=sum(float(r.get("dph") or 0.0) for r in fixed),
        )
        if inside is not None:
            cover, level = inside[0], inside[1] + held
        elif hold > target:
            rest = max(0.0, target - held)
            cover, level = cheapest_cover(items, rest, planning_unit(max(1.0, rest))), target
    return {id(r) for r in fixed} | {id(free[k]) for k in cover.keys}, level
