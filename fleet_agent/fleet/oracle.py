"""The cheapest set of machines that meets a target: an exact 0/1 covering knapsack.

minimise Σ cost_i · x_i  subject to  Σ rate_i · x_i ≥ target,  x_i ∈ {0, 1}

Solved by dynamic programming over capacity in whole proofs per hour: each
machine counts for the floor of its rate, so a chosen set really meets the
target (its true capacity can only be higher). O(machines × target) time, a
bitmap of choices for the reconstruction. Used as the yardstick of the market
benchmark and by the autopilot to cover a gap.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Cover",
    "Item",
    "cheapest_cover",
    "cheapest_cover_between",
    "cheapest_cover_with_spare",
    "planning_unit",
]


@dataclass(frozen=True)
class Item:
    """A machine that could be rented: its $/h and its proofs/h."""

    key: int
    cost: float
    rate: float


@dataclass(frozen=True)
class Cover:
    """The chosen machines, their total $/h and proofs/h; `met` False when even
    every machine together falls short (then all of them are chosen)."""

    keys: list[int]
    cost: float
    rate: float
    met: bool


def cheapest_cover(items: Sequence[Item], target: float, unit: float = 1.0) -> Cover:
    """The minimum-cost subset of `items` whose rates sum to at least `target`.

    Capacity is counted in whole `unit`s of proofs/h (each rate rounded down,
    the target up), so the answer always meets the target; a coarser unit
    keeps the table small on large targets (`planning_unit`).
    """
    need = math.ceil(target / unit - 1e-9)
    steps = {i.key: math.floor(i.rate / unit + 1e-9) for i in items}
    usable = [i for i in items if steps[i.key] > 0 and i.cost >= 0]
    if need <= 0:
        return Cover([], 0.0, 0.0, True)
    if sum(steps[i.key] for i in usable) < need:
        return Cover(
            [i.key for i in usable],
            sum(i.cost for i in usable),
            sum(i.rate for i in usable),
            False,
        )
    inf = math.inf
    # best[c]: the least cost reaching at least c units with the items seen so far.
    best = [0.0] + [inf] * need
    took = [_add(best, steps[item.key], item.cost) for item in usable]
    return _walk_back(usable, took, steps, need)


def _add(best: list[float], rate: int, cost: float) -> bytearray:
    """Add one item of `rate` units and `cost` to an "at least c units"
    table in place; returns the cells where taking it was cheaper."""
    row = bytearray(len(best))
    for c in range(len(best) - 1, 0, -1):
        candidate = best[max(0, c - rate)] + cost
        if candidate < best[c]:
            best[c] = candidate
            row[c] = 1
    return row


def cheapest_cover_between(
    items: Sequence[Item], low: float, high: float, unit: float = 1.0
) -> Cover | None:
    """The minimum-cost subset of `items` whose rates sum to at least `low`
    and at most `high`, or None if no subset lands in between.

    The same knapsack as `cheapest_cover`, on exact sums of whole `unit`s
    (rates rounded down): the set surely meets `low`, and may pass `high` by
    less than one unit per machine chosen (at `planning_unit`'s 4,000 steps,
    a fraction of a per cent). O(items × high / unit).
    """
    need = math.ceil(low / unit - 1e-9)
    if need <= 0:
        return Cover([], 0.0, 0.0, True)
    top = math.floor(high / unit + 1e-9)
    steps = {i.key: math.floor(i.rate / unit + 1e-9) for i in items}
    usable = [i for i in items if steps[i.key] > 0 and i.cost >= 0]
    if top < need or not usable:
        return None
    # best[c]: the least cost of a subset summing to exactly c units.
    best = [0.0] + [math.inf] * top
    took: list[bytearray] = []
    for item in usable:
        rate = steps[item.key]
        row = bytearray(top + 1)
        for c in range(top, rate - 1, -1):
            candidate = best[c - rate] + item.cost
            if candidate < best[c]:
                best[c] = candidate
                row[c] = 1
        took.append(row)
    c = min(range(need, top + 1), key=lambda e: best[e])
    if best[c] == math.inf:
        return None
    return _walk_back(usable, took, steps, c)


def cheapest_cover_with_spare(
    items: Sequence[Item],
    target: float,
    *,
    floor: float,
    widest: float,
    unit: float = 1.0,
    base: float = 0.0,
    base_spared: float = 0.0,
) -> Cover:
    """The minimum-cost subset of `items` whose rates sum to at least
    max(`target`, `floor` + r), r being the largest rate in the subset that
    is at most `widest` (0 when none is): a fleet that still has `floor`
    after losing any one of its machines of up to `widest`.

    With `base`, the subset joins machines already held: `base` proofs/h of
    them, the largest of them at most `widest` being `base_spared` (0 when
    none is). The subset then brings the rest of the joint fleet's level:
    max(`target`, `floor` + max(r, `base_spared`)) − `base`.

    One pass of `cheapest_cover`'s knapsack: the machines that are never
    spared first, then the spared ones by rising rate; the cheapest subset
    whose largest spared machine is the k-th is that machine plus the
    cheapest subset of those before it reaching the rest of its level,
    read off the table before the k-th is added (its cells mean "at least",
    so no search). `met` False when no subset reaches its level.
    """
    steps = {i.key: math.floor(i.rate / unit + 1e-9) for i in items}
    usable = [i for i in items if steps[i.key] > 0 and i.cost >= 0]
    spared = sorted((i for i in usable if i.rate <= widest), key=lambda i: i.rate)
    order = [i for i in usable if i.rate > widest] + spared

    def need(r: float) -> int:
        level = max(target, floor + max(r, base_spared))
        return max(0, math.ceil((level - base) / unit - 1e-9))

    top = max([need(0.0)] + [need(i.rate) for i in spared])
    best = [0.0] + [math.inf] * top
    took: list[bytearray] = []
    # (cost, items before it in `order`, the cell to walk back from, the item or None)
    found: tuple[float, int, int, Item | None] = (math.inf, 0, 0, None)
    for n, item in enumerate(order):
        rate = steps[item.key]
        if n == len(order) - len(spared):  # every never-spared machine is in
            found = min(found, (best[need(0.0)], n, need(0.0), None), key=lambda f: f[0])
        if item.rate <= widest:
            rest = max(0, need(item.rate) - rate)
            found = min(found, (best[rest] + item.cost, n, rest, item), key=lambda f: f[0])
        took.append(_add(best, rate, item.cost))
    if not spared:
        found = min(found, (best[need(0.0)], len(order), need(0.0), None), key=lambda f: f[0])
    cost, before, cell, last = found
    if cost == math.inf:
        return Cover([], 0.0, 0.0, False)
    cover = _walk_back(order[:before], took[:before], steps, cell)
    if last is None:
        return cover
    return Cover([*cover.keys, last.key], cover.cost + last.cost, cover.rate + last.rate, True)


def _walk_back(
    usable: Sequence[Item], took: Sequence[bytearray], steps: dict[int, int], c: int
) -> Cover:
    """The items whose choice bits lead to the table's cell `c`, last item first."""
    chosen: list[Item] = []
    for item, row in zip(reversed(usable), reversed(took), strict=True):
        if c > 0 and row[c]:
            chosen.append(item)
            c = max(0, c - steps[item.key])
    chosen.reverse()
    return Cover(
        [i.key for i in chosen],
        sum(i.cost for i in chosen),
        sum(i.rate for i in chosen),
        True,
    )


def planning_unit(target: float, steps: int = 4_000) -> float:
    """The unit that makes `cheapest_cover` `steps` deep for `target`: fine
    enough that rounding rarely adds a machine, coarse enough to stay fast."""
    return max(1e-6, target / steps)
