"""The autopilot's fleet policy: what a careful operator would do, as pure functions.

Replace dead, stuck and not-proving machines (triage.py), rent the cheapest
set of offers that covers a gap without leaving the ±5 % band (its rules:
band.py), hold a spare for one failure where it fits in the band and costs
at most SPARE_PREMIUM more (spare.py, band.py), release the most
expensive machines per proof the level held does not need, but never a
healthy machine younger than the agent's `min_release_age_minutes` (the
snapshot marks it not `releasable`). A temporary machine (a bridge while a
large gap's cover loads: bridges.py, temporary.py) is no cover: the gap and
the subset kept are the other machines' own, and it goes as soon as they
prove the target without it. A settled fleet past the band that no release
brings back may swap (swap.py); one inside it may trade a dear machine for a
much cheaper one of its size (trade.py): `FleetPlan.swap`, `FleetPlan.trade`.
Works on the same snapshot rows and search results the model sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fleet_agent.autopilot.band import cheapest_kept, inside_band
from fleet_agent.autopilot.swap import Held, wants_swap
from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.fleet.oracle import Item, cheapest_cover, planning_unit
from fleet_agent.fleet.spare import BAND, cheapest_spared_cover
from fleet_agent.fleet.triage import hold_of_alive, triage
from fleet_agent.policy.band import SMALL_GAP, TOP_MARGIN, UNMEASURED_SHARE

__all__ = ["FleetPlan", "choose_offers", "plan_fleet"]


@dataclass(frozen=True)
class FleetPlan:
    destroy: list[tuple[int, str]]  # (instance id, reason)
    # Capacity once loading machines run, after the destroys; temporary ones not counted.
    expected_after: float
    gap: float  # hold − expected_after (> 0: rent)
    hold: float  # the level held: the target, or more with a spare (spare.py)
    # With a spare: the expected proofs/h of each machine kept, so a cover
    # can hold the level of the fleet it joins (`choose_offers`). None without.
    held: tuple[float, ...] | None = None
    # The $/h of the machines kept (those of `held`, or all kept without a spare).
    held_dph: float = 0.0
    # The machines kept, when a settled fleet stays past the band with them
    # and only a swap brings it back (swap.py); () otherwise.
    swap: tuple[Held, ...] = ()
    # The machines kept, when a settled fleet inside the band may trade a
    # dear machine for a much cheaper one of its size (trade.py); () otherwise.
    trade: tuple[Held, ...] = ()


def _per_proof(row: dict[str, Any]) -> float:
    rate = float(row.get("expected_proofs_per_hour") or 0.0)
    return float(row.get("dph") or 0.0) / rate if rate else float("inf")


def _sure(row: dict[str, Any]) -> float:
    """What a machine surely gives: its measured rate, or a share of the estimate."""
    measured = row.get("measured_proofs_per_hour")
    if measured is not None:
        return float(measured)
    return UNMEASURED_SHARE * float(row.get("expected_proofs_per_hour") or 0.0)


def plan_fleet(rows: list[dict[str, Any]], target: float, *, spare: bool = False) -> FleetPlan:
    """What to destroy, and the gap left to rent, to hold `target` (plus a
    spare for one failure when `spare` and it fits in the band).

    A temporary machine (temporary.py) is no cover: the level, the gap and
    the subset kept are the other machines' own, so a failure among them is
    replaced as if the bridges were not there. A bridge goes, once
    releasable, as soon as the rest proves the target without it."""
    destroy, alive = triage(rows)
    core = [r for r in alive if not r.get("temporary")]
    hold = hold_of_alive(core, target, spare=spare)
    released: set[int] = set()
    # A machine that may not be released yet stays whatever the subset, so
    # the others top up what it surely gives, as the releases below are
    # judged: on its estimate, a young machine counted short left a release
    # under the level, and the fleet kept a third too much for 20 minutes
    # ("Release" in bench/results/2026-12-07-autopilot-rule-cases.md). A
    # releasable machine is chosen on its estimate: an unmeasured one is not
    # let go for the 10 % its measurement may still give.
    judged = [
        r if r.get("releasable", True) else {**r, "expected_proofs_per_hour": _sure(r)}
        for r in core
    ]
    kept_ids, level = cheapest_kept(judged, target, hold, spare=spare)
    keep = {id(r) for r, j in zip(core, judged, strict=True) if id(j) in kept_ids}
    proving = sum(float(r.get("proofs_per_hour") or 0.0) for r in alive)
    sure = sum(_sure(r) for r in alive)
    # A bridge goes once the others prove the target without it, not the
    # spare's level: it is one small machine (bridges.py), so the fleet stays
    # inside the band while the cover's slow machines arrive, and the cover
    # still loading brings the level.
    floor = min(level, target)
    for row in sorted((r for r in alive if r.get("temporary")), key=_per_proof, reverse=True):
        now = float(row.get("proofs_per_hour") or 0.0)
        if (
            row.get("releasable", True)
            and proving - now >= floor - 1e-6
            and sure - _sure(row) >= floor - 1e-6
        ):
            destroy.append((int(row["id"]), "a temporary machine the rest no longer needs"))
            released.add(id(row))
            proving -= now
            sure -= _sure(row)
    # The other machines hold the level by themselves from here on.
    expected = sum(float(r.get("expected_proofs_per_hour") or 0.0) for r in core)
    proving = sum(float(r.get("proofs_per_hour") or 0.0) for r in core)
    sure = sum(_sure(r) for r in core)
    # Release what the kept subset leaves out, most expensive per proof
    # first, while the level it keeps stays held without it by the
    # capacity expected, by the capacity proving now (a machine is not
    # released for one still fetching its parameters) and by what is sure
    # (measured, or a share of the estimate).
    for row in sorted(core, key=_per_proof, reverse=True):
        rate = float(row.get("expected_proofs_per_hour") or 0.0)
        now = float(row.get("proofs_per_hour") or 0.0)
        if (
            rate
            and id(row) not in keep
            and expected - rate >= level - 1e-6
            and proving - now >= level - 1e-6
            and sure - _sure(row) >= level - 1e-6
        ):
            destroy.append((int(row["id"]), "not needed for the target"))
            released.add(id(row))
            expected -= rate
            proving -= now
            sure -= _sure(row)
    held = (
        tuple(
            float(r.get("expected_proofs_per_hour") or 0.0) for r in core if id(r) not in released
        )
        if spare
        else None
    )
    kept = tuple(
        Held(
            rate=float(r.get("expected_proofs_per_hour") or 0.0),
            dph=float(r.get("dph") or 0.0),
            releasable=bool(r.get("releasable", True)),
            settled=bool(r.get("proofs_per_hour"))
            and r.get("measured_proofs_per_hour") is not None,
        )
        for r in core
        if id(r) not in released
    )
    # No swap while anything else is under way: a destroy, a gap, a bridge.
    quiet = not destroy and hold - expected <= 0 and len(core) == len(alive)
    settled = quiet and bool(kept) and all(h.settled for h in kept)
    swap = settled and wants_swap(kept, target)
    return FleetPlan(
        destroy=destroy,
        expected_after=expected,
        gap=hold - expected,
        hold=hold,
        held=held,
        held_dph=sum(float(r.get("dph") or 0.0) for r in core if id(r) not in released),
        swap=kept if swap else (),
        trade=kept if settled and not swap else (),
    )


def choose_offers(
    offers: list[dict[str, Any]],
    gap: float,
    target: float,
    *,
    hold: float | None = None,
    held: Sequence[float] | None = None,
    held_dph: float = 0.0,
) -> list[dict[str, Any]]:
    """Offers (rows as search_offers gives them) that cover `gap` at the least
    $/h without taking the fleet past the band (`target` + BAND; planned
    TOP_MARGIN under that top, band.py). `gap` is
    counted up to `hold` (the level held, FleetPlan.hold; the target when
    None), so the fleet ends at most (1 + BAND) × target − hold past it.

    With `held` (FleetPlan.held: the fleet holds a spare), the cover is the
    cheapest set whose joint fleet with the machines held holds its own
    level (spare.py, `cheapest_spared_cover`): a machine it rents may be the
    new largest one to spare, which raises the level. Covering `gap` alone
    then took a second rental for the spare, often a dear machine for a
    small gap, where one cover chosen for both was as cheap as the target's.

    The exact cheapest cover of the offers shown (fleet_agent/fleet/oracle.py):
    a greedy choice by $ per proof overshoots a small gap with a big machine,
    or fills it with many small ones where one mid-sized machine is cheaper.
    A cover that would end over the band is not released again (no machine
    is small enough to go without), so the fleet would stay out of band for
    hours: the cheapest cover that ends inside it is taken instead, if it
    costs at most INSIDE_BAND_PREMIUM more: one up to the level, else one up
    to the target (a spare is never bought past the band, nor inside it
    when the fleet with the level's set costs more than SPARE_PREMIUM over
    the fleet with the target's; `held_dph` is the fleet's $/h besides the
    cover). If none does, a
    gap that leaves the fleet at most SMALL_GAP of the target under it is
    left open (the fleet is inside the band), and a larger one is covered
    past the band.
    """
    pool = [o for o in offers if float(o.get("est_proofs_per_hour") or 0.0) > 0]
    if gap <= 0 or not pool:
        return []
    above = (hold if hold is not None else target) - target  # the spare's share of the gap
    items = [
        Item(key=k, cost=offer_dph(o), rate=float(o["est_proofs_per_hour"]))
        for k, o in enumerate(pool)
    ]
    cheapest = cheapest_cover(items, gap, planning_unit(gap))
    if held is not None:
        joint = cheapest_spared_cover(items, target, held=held)
        if joint.met:
            cheapest = joint
    ceiling = gap - above + (BAND - TOP_MARGIN) * target
    if cheapest.rate > ceiling:
        inside = inside_band(
            items,
            (gap, gap - above),
            ceiling,
            cheapest,
            target_low=gap - above,
            base_cost=held_dph,
        )
        if inside is not None:
            return [pool[k] for k in inside[0].keys]
        if gap - above <= SMALL_GAP * target:
            return []
    return [pool[k] for k in cheapest.keys]
