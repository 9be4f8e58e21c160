"""The autopilot's fleet policy: what a careful operator would do, as pure functions.

Replace dead and stuck machines, rent the cheapest capacity per proof to cover
a gap, release the most expensive machines the target does not need. Works on
the same snapshot rows and search results the model sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fleet_agent.vast.models import phase_of

__all__ = ["STUCK_LOADING_MINUTES", "FleetPlan", "choose_offers", "plan_fleet"]

# A machine still not running after this long is replaced (vast.ai hosts
# sometimes never finish pulling the image). Age counts from the rental, so a
# reboot (transient, and possibly hours after the rental) is exempt.
STUCK_LOADING_MINUTES = 30.0


@dataclass(frozen=True)
class FleetPlan:
    destroy: list[tuple[int, str]]  # (instance id, reason)
    expected_after: float  # capacity once loading machines run, after the destroys
    gap: float  # target − expected_after (> 0: rent)


def _per_proof(row: dict[str, Any]) -> float:
    rate = float(row.get("expected_proofs_per_hour") or 0.0)
    return float(row.get("dph") or 0.0) / rate if rate else float("inf")


def plan_fleet(rows: list[dict[str, Any]], target: float) -> FleetPlan:
    destroy: list[tuple[int, str]] = []
    alive: list[dict[str, Any]] = []
    for row in rows:
        state = str(row.get("state"))
        phase = phase_of(state)
        age = row.get("age_minutes")
        if phase == "dead":
            destroy.append((int(row["id"]), f"instance is {state}; replacing it"))
        elif phase == "idle":
            # Stopped or frozen: proves nothing, still billed.
            destroy.append((int(row["id"]), f"instance is {state}, not capacity; replacing it"))
        elif phase in ("gone", "unrecognized"):
            # Not in the fleet, or a status this code does not know: not counted
            # as capacity, and not destroyed on a guess.
            continue
        elif (
            phase == "booting"
            and state != "rebooting"
            and age is not None
            and float(age) > STUCK_LOADING_MINUTES
        ):
            destroy.append((int(row["id"]), f"stuck {state} for {float(age):.0f} min"))
        else:
            alive.append(row)
    expected = sum(float(r.get("expected_proofs_per_hour") or 0.0) for r in alive)
    # Release surplus, most expensive per proof first, while the target stays met.
    for row in sorted(alive, key=_per_proof, reverse=True):
        rate = float(row.get("expected_proofs_per_hour") or 0.0)
        if rate and expected - rate >= target:
            destroy.append((int(row["id"]), "not needed for the target"))
            expected -= rate
    return FleetPlan(destroy=destroy, expected_after=expected, gap=target - expected)


def choose_offers(offers: list[dict[str, Any]], gap: float) -> list[dict[str, Any]]:
    """Offers (rows as search_offers gives them) that cover `gap` cheaply.

    Greedy with an eye on overshoot: fill with the cheapest machine per proof
    while that beats the cheapest single machine covering the whole remainder;
    then take that covering machine. Buying a huge machine for a small gap would
    leave capacity far above target that no release could trim.
    """
    pool = [o for o in offers if float(o.get("est_proofs_per_hour") or 0.0) > 0]
    chosen: list[dict[str, Any]] = []
    remaining = gap
    while remaining > 0 and pool:
        rate = {id(o): float(o["est_proofs_per_hour"]) for o in pool}
        covering = [o for o in pool if rate[id(o)] >= remaining]
        partial = [o for o in pool if rate[id(o)] < remaining]
        cover = min(covering, key=lambda o: float(o["dph"])) if covering else None
        fill = min(partial, key=lambda o: float(o["dph"]) / rate[id(o)]) if partial else None
        if fill is not None and (
            cover is None or float(fill["dph"]) / rate[id(fill)] * remaining < float(cover["dph"])
        ):
            pick = fill
        else:
            assert cover is not None
            pick = cover
        chosen.append(pick)
        pool.remove(pick)
        remaining -= rate[id(pick)]
    return chosen
