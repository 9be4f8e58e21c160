"""The Snark Market's bounds on the fleet, checked in code at each create and
destroy (activities/market_guard.py), as the caps are:

- **slots bound the fleet**: a rental may not take the fleet's GPUs past the
  node's work slots (at least one GPU: a node without slots earns its first
  by challenge proofs, which a GPU must prove). A GPU beyond the slots has
  no work: each slot holds one ask or one assigned proof;
- **drain before shrink**: a release of capacity may not leave less than the
  open proofs need before their deadline, nor take the fleet to zero,
  while the node still asks for work: requests go off first, and the queue
  drains. "Need" is the open rows proved within `DRAIN_WINDOW_H` (half the
  45-minute deadline: a proof already waiting has used some of it).

Read on the latest `MarketPoint`: without one (the monitor has not read
the node yet) the rules allow, and say so nowhere: the caps still hold.
Pure: no I/O.
"""

from __future__ import annotations

from .point import CHALLENGES_PER_SLOT, MarketPoint

__all__ = ["DRAIN_WINDOW_H", "create_bound", "destroy_bound"]

#: Hours of the remaining fleet's capacity the open rows may take.
DRAIN_WINDOW_H = 0.5


def create_bound(point: MarketPoint | None, gpus_now: int, gpus_added: int) -> str | None:
    """Why a rental of `gpus_added` GPUs beside `gpus_now` (listed and in
    flight) is refused, or None."""
    if point is None:
        return None
    slots = point.slots_total
    room = max(1, slots)
    if gpus_now + gpus_added <= room:
        return None
    short = gpus_now + gpus_added - slots
    return (
        f"the node has {slots} work slot(s) ({point.ledger.challenges} challenge proofs): "
        f"{gpus_now} GPU(s) rented and {gpus_added} more would leave GPUs with no work. "
        f"{short} more slot(s) need {short * CHALLENGES_PER_SLOT} more challenge proofs"
    )


def destroy_bound(
    point: MarketPoint | None, capacity_after_per_h: float, releases_capacity: bool
) -> str | None:
    """Why releasing capacity down to `capacity_after_per_h` is refused, or None."""
    if point is None or not releases_capacity:
        return None
    open_rows = point.rows_open
    if (point.enabled or point.asks_open) and capacity_after_per_h <= 0:
        # An open ask may still be assigned work after requests go off.
        return (
            f"the node still asks the market for work ({point.asks_open} open ask(s)): turn "
            "requests off first (set_requests enabled=false withdraw_open=true) and let its "
            "queue drain before the fleet goes"
        )
    if open_rows and capacity_after_per_h * DRAIN_WINDOW_H < open_rows:
        then = "turn requests off first (set_requests enabled=false), " if point.enabled else ""
        return (
            f"{open_rows} open proof(s) need {open_rows / DRAIN_WINDOW_H:.0f} proofs/h to meet "
            f"their 45-minute deadline; the fleet would keep {capacity_after_per_h:.0f}: "
            f"{then}let the queue drain, then release"
        )
    return None
