"""A faster cover for a gap the fleet sits under the band for while it loads.

A failure of a machine larger than the spare covers (spare.py) leaves the
fleet under the ±5 % band until its replacement proves. Where bridges fit
(bridges.py), fast temporary machines prove meanwhile; where none fits, at
a small target (the fast offers are 25-proof machines, 8 % of a target of
300, larger than a bridge may be) or for a gap under BRIDGE_MIN_GAP, the
cheapest cover was often one slow host, where a fast one of the same size
in the same search cost a premium of about 1 % of the fleet's $/h ("Fast
cover" in bench/results/2026-12-07-autopilot-rule-cases.md). So when the fleet is under the
band until the cover proves and no bridge is rented beside it, the cover
is taken of fast offers (`bridges.fast`: est_load_minutes ≤ 15) when the
fleet with it costs at most FAST_COVER_PREMIUM more per hour
(docs/decisions/load-time.md, "A fast cover where no bridge fits"). Pure: search rows
in, search rows out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fleet_agent.autopilot.bridges import fast
from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.fleet.spare import BAND
from fleet_agent.policy.premiums import FAST_COVER_PREMIUM

__all__ = ["faster_cover", "under_meanwhile"]


def _dph(rows: Sequence[dict[str, Any]]) -> float:
    return sum(offer_dph(o) for o in rows)


def under_meanwhile(expected_after: float, target: float) -> bool:
    """Whether the fleet, without the cover it is about to rent, is under the
    band (FleetPlan.expected_after: what it has, loading machines at their
    estimate)."""
    return target > 0 and expected_after < (1 - BAND) * target


def _rate(rows: Sequence[dict[str, Any]]) -> float:
    return sum(float(o.get("est_proofs_per_hour") or 0.0) for o in rows)


def faster_cover(
    offers: list[dict[str, Any]],
    picks: list[dict[str, Any]],
    choose: Callable[[list[dict[str, Any]]], list[dict[str, Any]]],
    *,
    held_dph: float,
    room: float,
) -> list[dict[str, Any]] | None:
    """The cover `choose` (the autopilot's `choose_offers` for the gap) makes
    of the fast offers alone, when `picks` (its cover of all `offers`) has a
    slow machine, the fleet with the fast cover costs at most
    FAST_COVER_PREMIUM more per hour than with `picks` (`held_dph`: the $/h
    of the machines kept besides it), and the fast cover brings no more than
    `picks` or than `room` (proofs/h up to the band's planned top): `choose`
    covers a gap past the band when nothing ends inside it, and a fast
    cover must not take the fleet there where the cheapest did not.
    Else None."""
    if not picks or all(fast(o) for o in picks):
        return None
    quick = choose([o for o in offers if fast(o)])
    if not quick or _rate(quick) > max(_rate(picks), room) + 1e-9:
        return None
    if _dph(quick) - _dph(picks) > FAST_COVER_PREMIUM * (held_dph + _dph(picks)):
        return None
    return quick
