"""Bridges after a large gap: fast-loading temporary machines beside the cover.

After an increase the cover's machines prove in two groups: hosts whose link
fills the parameter source load in 12-18 minutes, the rest in 28-62, and that
wait was most of a day's time out of the ±5 % band (docs/decisions/load-time.md,
"Bridges"; the tries: bench/results/2026-12-03-load-time-a.md). For a gap of
at least BRIDGE_MIN_GAP of the target, the autopilot rents beside the cheapest
cover the cheapest set of offers estimated to prove within BRIDGE_FAST_MINUTES
for BRIDGE_SHARE of what the cover's slow machines bring, each small
(BRIDGE_MAX_SIZE of the target) and few (BRIDGE_MAX_MACHINES), each as
`temporary` (temporary.py): they are no cover, so a failure of a cover machine
is still replaced, and each goes as soon as the others prove the target
without it. Pure: search rows in, search rows out.
"""

from __future__ import annotations

from typing import Any

from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.fleet.oracle import Item, cheapest_cover, planning_unit
from fleet_agent.policy.bridges import (
    BRIDGE_FAST_MINUTES,
    BRIDGE_MAX_MACHINES,
    BRIDGE_MAX_SIZE,
    BRIDGE_MIN_GAP,
    BRIDGE_SHARE,
)

__all__ = [
    "BRIDGE_RESERVE",
    "BRIDGE_SEARCH_LIMIT",
    "bridge_room",
    "bridges",
    "fast",
    "wants_bridges",
]

#: Rentals of the hour left to replacements when bridges are counted against
#: `max_creates_per_hour`: a new cover's boots fail or hang at 3-10 %.
BRIDGE_RESERVE = 6
#: Offers searched for a bridged gap (the fast ones are a minority of the
#: cheapest); the tool's maximum.
BRIDGE_SEARCH_LIMIT = 50


def wants_bridges(gap: float, target: float) -> bool:
    """Whether a gap is large enough to bridge."""
    return target > 0 and gap >= BRIDGE_MIN_GAP * target


def _rate(offer: dict[str, Any]) -> float:
    return float(offer.get("est_proofs_per_hour") or 0.0)


def fast(offer: dict[str, Any]) -> bool:
    """Whether an offer (a search row) is estimated to prove within
    BRIDGE_FAST_MINUTES of its rental."""
    minutes = offer.get("est_load_minutes")
    return minutes is not None and float(minutes) <= BRIDGE_FAST_MINUTES


def bridge_room(max_creates_per_hour: int, rented_last_hour: int, cover: int) -> int:
    """How many bridges fit beside a cover of `cover` rentals under the
    hour's create limit, leaving BRIDGE_RESERVE for replacements."""
    return max(0, max_creates_per_hour - rented_last_hour - cover - BRIDGE_RESERVE)


def bridges(
    offers: list[dict[str, Any]],
    cover: list[dict[str, Any]],
    gap: float,
    target: float,
    *,
    room: int = BRIDGE_MAX_MACHINES,
) -> list[dict[str, Any]]:
    """The offers to rent as temporary beside `cover` (both search rows): the
    cheapest set of fast offers not in the cover, none larger than
    BRIDGE_MAX_SIZE of the target, covering BRIDGE_SHARE of the cover's slow
    machines' rate (every such offer when they fall short), then at most
    BRIDGE_MAX_MACHINES of them and `room` (`bridge_room`), cheapest per proof
    first. Empty for a small gap."""
    if not wants_bridges(gap, target):
        return []
    want = BRIDGE_SHARE * sum(_rate(o) for o in cover if not fast(o))
    if want <= 0:
        return []
    taken = {o.get("offer_id") for o in cover}
    largest = min(want, BRIDGE_MAX_SIZE * target)
    pool = [
        o for o in offers if o.get("offer_id") not in taken and fast(o) and 0 < _rate(o) <= largest
    ]
    items = [Item(key=k, cost=offer_dph(o), rate=_rate(o)) for k, o in enumerate(pool)]
    chosen = [pool[k] for k in cheapest_cover(items, want, planning_unit(want)).keys]
    chosen.sort(key=lambda o: offer_dph(o) / _rate(o))
    return chosen[: max(0, min(BRIDGE_MAX_MACHINES, room))]
