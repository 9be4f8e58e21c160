"""The hour after each increase of the market day's target, from the
simulator's truth (bench/market_day/day.py): how long the fleet was under the
±5 % band, when it was first back in it, and the bridges rented for it.

An increase needs machines that load 12-60 minutes before they prove, so
the hour after it is most of a day's time out of the band; a policy change
aimed at it is judged on many increases (MARKET_DAY_TARGETS runs two in
five hours), not on whole days, whose later hours move with their paths."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from bench.market_day._truth import BAND, SETTLE_S, TARGETS, Day, in_band

__all__ = ["after_increases", "increases_line"]


def after_increases(
    day: Day, targets: Sequence[tuple[float, float]] = TARGETS
) -> list[dict[str, Any]]:
    """One entry per rise of `targets` (the bench's schedule) after the
    start: its hour, the targets before and after, the minutes under the
    band in the hour after it (`under_min`), the minutes to the first sample
    back in the band (`back_min`, None when not within that hour), and the
    bridges rented in that hour and how many of them hung or failed."""
    step = day.step()
    out = []
    for (_, before), (hour, target) in itertools.pairwise(targets):
        start = hour * 3600
        if target <= before or not any(t > start for t, *_ in day.samples):
            continue
        window = [s for s in day.samples if start < s[0] <= start + SETTLE_S]
        under = sum(1 for _, tgt, cap, _ in window if cap < (1 - BAND) * tgt)
        back = next((t for t, tgt, cap, _ in window if in_band(tgt, cap)), None)
        bridges = [
            life
            for life in day.lives.values()
            if life.temporary and start <= life.created < start + SETTLE_S
        ]
        out.append(
            {
                "hour": hour,
                "from": before,
                "to": target,
                "under_min": round(under * step / 60, 1),
                "back_min": round((back - start) / 60, 1) if back is not None else None,
                "bridges": len(bridges),
                "bridges_failed": sum(
                    life.boot != "run" or life.failed_at is not None for life in bridges
                ),
            }
        )
    return out


def increases_line(results: Sequence[dict[str, Any]]) -> str:
    """Across days: the increases, their mean and worst minutes under the
    band in the hour after, the mean minutes back to it, and the bridges."""
    rises = [i for r in results for i in r.get("after_increases") or []]
    if not rises:
        return "no increase"
    under = [float(i["under_min"]) for i in rises]
    back = [float(i["back_min"]) for i in rises if i["back_min"] is not None]
    mean_back = f"{sum(back) / len(back):.1f}" if back else "-"
    return (
        f"{len(rises)} increases: under the band {sum(under) / len(under):.1f} min on the mean "
        f"(worst {max(under):.0f}), back in it after {mean_back} min "
        f"({len(rises) - len(back)} not within the hour); bridges "
        f"{sum(int(i['bridges']) for i in rises)}, "
        f"{sum(int(i['bridges_failed']) for i in rises)} hung or failed"
    )
