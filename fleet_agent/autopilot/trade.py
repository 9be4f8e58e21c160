"""A trade: rent a much cheaper machine of about the same size as a dear one
the fleet has, so that the dear one can go once the new one proves.

A failure is replaced at the market of its hour, and right after a cover
took the cheapest offers that market is dearer, and the fleet keeps the
dear replacements all day (a case: bench/results/
2026-12-07-autopilot-rule-cases.md, "Trade"). The rebuilds tried before (whole
fleets, or one offer whenever the fleet's $/h fell 5 %) bought cheaper
fleets of larger machines, whose failures the spare covers less often, and
lost the band (docs/decisions/load-time.md, "A swap for cost too"). A trade keeps the
fleet's shape: one offer for one machine, no larger than the machine it
replaces or than the largest the spare covers, the spare's level not
raised, and only for a large saving on that machine (TRADE_SAVING), which
pays for the new one's load within hours.

As with a swap (swap.py), the trade is made before the break: the offer is
rented here, and the ordinary release rule (policy.py) lets the dear machine
go once the new one proves. The trade is judged by that rule itself
(`released_once_proving`): an offer counts only when the rule, with the
offer proving and not yet measured, lets one dear machine go. Only a
settled fleet inside the band trades (policy.py sets `FleetPlan.trade`
only then), one machine at a time: the new one loading unsettles the
fleet. Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fleet_agent.autopilot.policy import plan_fleet
from fleet_agent.autopilot.swap import Held
from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.fleet.spare import BAND, SPARE_MAX, hold_level
from fleet_agent.policy.band import TOP_MARGIN
from fleet_agent.policy.premiums import TRADE_SAVING

__all__ = ["released_once_proving", "trade_offers"]


def trade_offers(
    offers: list[dict[str, Any]],
    held: Sequence[Held],
    target: float,
    *,
    spare: bool,
) -> list[dict[str, Any]]:
    """The offer (a search_offers row, in a list) to rent for the trade that
    saves the most $/h: an offer with which, once it proves (still
    unmeasured), the release rule (policy.py) lets exactly one machine of
    `held` go; the offer at least TRADE_SAVING cheaper per hour than that
    machine and no larger than it or than the largest machine the spare
    covers, the level not raised and the fleet under the planned top. []
    when no trade fits, or `held` is not a settled fleet inside the band."""
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
    for offer in offers:
        rate, dph = float(offer.get("est_proofs_per_hour") or 0.0), offer_dph(offer)
        if rate <= 0:
            continue
        gone = released_once_proving(held, rate, dph, target, spare=spare)
        if len(gone) != 1:
            continue
        (k,) = gone
        old = held[k]
        new_level = hold_level(target, [*rates[:k], *rates[k + 1 :], rate], spare=spare)
        if (
            rate <= max(old.rate, widest)
            and dph <= (1 - TRADE_SAVING) * old.dph
            and new_level <= level + 1e-6
            and total - old.rate + rate <= top + 1e-6
            and (best is None or old.dph - dph > best[0])
        ):
            best = (old.dph - dph, offer)
    return [best[1]] if best is not None else []


def released_once_proving(
    held: Sequence[Held], rate: float, dph: float, target: float, *, spare: bool
) -> list[int]:
    """Indexes of the machines of `held` that the release rule (policy.py,
    `plan_fleet`) lets go as soon as a new machine of `rate` and `dph` proves,
    before its first measurement (so at UNMEASURED_SHARE of its estimate, and
    too young to be released itself). The trade is judged by the rule that
    will carry it out: judged by a sum of its own, a trade was rented to
    replace one machine, and the rule, which releases the dearest per proof
    first, let another go instead, once the new machine was measured, the
    fleet over the band meanwhile ("Trade" in bench/results/
    2026-12-07-autopilot-rule-cases.md)."""
    rows: list[dict[str, Any]] = [
        {
            "id": k,
            "state": "running",
            "expected_proofs_per_hour": h.rate,
            "proofs_per_hour": h.rate,
            "measured_proofs_per_hour": h.rate,
            "dph": h.dph,
            "releasable": h.releasable,
        }
        for k, h in enumerate(held)
    ]
    rows.append(
        {
            "id": len(held),
            "state": "running",
            "expected_proofs_per_hour": rate,
            "proofs_per_hour": rate,
            "measured_proofs_per_hour": None,
            "dph": dph,
            "releasable": False,
        }
    )
    plan = plan_fleet(rows, target, spare=spare)
    if plan.gap > 1e-6:
        return []
    return [iid for iid, _ in plan.destroy]
