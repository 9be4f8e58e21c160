"""The capacity a fleet holds: the target, or a little more so that one failure
does not take the fleet out of the band.

A machine that dies is replaced within a poll, but its replacement proves only
after its boot and its 47 GiB parameter download: 15 minutes on the fastest
hosts, an hour on slow ones. At a small target one machine is a large share
of it (25 proofs/h is 8 % of 300), so every failure left the fleet under the
±5 % band for that long (docs/decisions/load-time.md, "A spare for one failure"). With
the spare, the fleet holds enough that losing any one of its machines
still leaves it within 5 % under the target, for every machine small
enough for that to fit well inside the band.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .oracle import Cover, Item, cheapest_cover_with_spare, planning_unit

__all__ = ["BAND", "SPARE_MAX", "cheapest_spared_cover", "hold_level", "spare_shown"]

#: The band the fleet is held in, a share of the target either side (issue 7).
BAND = 0.05
#: The most a spare adds, a share of the target. A level near the band's top
#: leaves no room for the truth: a machine proves 0.93-1.04 × its estimate
#: until measured, and a cover must land between the level and the band's
#: top. At 5 % (a spare for any machine of up to 10 % of the target) the
#: market day spent hours just over the band; 3.5 % still spares a 25-proof
#: machine at target 300.
SPARE_MAX = 0.035


def hold_level(target: float, rates: Iterable[float], *, spare: bool = True) -> float:
    """Proofs/h to hold for `target` with machines of `rates` (expected proofs/h
    of each machine that is or will be capacity).

    With `spare`, the least level at which losing any one machine of up to
    (BAND + SPARE_MAX) × target leaves the fleet at (1 − BAND) × target or
    more. A larger machine does not raise the level: its loss takes the fleet
    out of the band whatever is held safely inside it. The target when no
    machine is that small, or every one is at most BAND × target.
    """
    if not spare or target <= 0:
        return target
    widest = (BAND + SPARE_MAX) * target
    spared = max((r for r in rates if 0 < r <= widest), default=0.0)
    return max(target, (1 - BAND) * target + spared)


def spare_shown(hold: float | None, target: float) -> float | None:
    """The level to show beside `target` (the fleet line, `fleet`, the
    console): `hold` when a spare raises it, else None."""
    return hold if hold is not None and hold > target + 0.05 else None


def cheapest_spared_cover(
    items: Sequence[Item],
    target: float,
    unit: float | None = None,
    *,
    held: Sequence[float] = (),
) -> Cover:
    """The minimum-cost subset of `items` that holds its own `hold_level`:
    the target, and enough more that losing any one of its machines of up to
    (BAND + SPARE_MAX) × target leaves (1 − BAND) × target. The yardstick of
    a fleet that holds a spare (bench/market_day/day.py), as `cheapest_cover` is
    of one that holds the target. `met` False when nothing holds its level.

    `held`: the rates of machines the fleet has already (kept whatever is
    chosen); the subset is then the cheapest whose joint fleet holds the
    joint fleet's level. The autopilot rents so (fleet_agent/autopilot/policy.py):
    a cover of the target first and the spare after it took two rentals,
    the second often a dear one for a small gap.
    """
    floor, widest = (1 - BAND) * target, (BAND + SPARE_MAX) * target
    base = sum(held)
    if unit is None:
        unit = planning_unit(max(1.0, max(target, floor + widest) - base))
    return cheapest_cover_with_spare(
        items,
        target,
        floor=floor,
        widest=widest,
        unit=unit,
        base=base,
        base_spared=max((r for r in held if 0 < r <= widest), default=0.0),
    )
