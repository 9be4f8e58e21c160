"""Each failure of the market day, from the simulator's truth
(bench/market_day/day.py): the failed machine's share of the target, how long
until it was destroyed, until its replacement proved, and the minutes the
fleet spent under the ±5 % band meanwhile.

After the hour after each change, a failure of a machine larger than the
spare covers is the day's largest cause of time out of the band
(`failure_too_large_to_spare`, bench/market_day/_causes.py). A change aimed at it
is judged on many failures (a small target and harsh faults give a dozen
in a few hours), not on whole days, whose later hours move with their
paths, as `after_increases` is for the rises."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.market_day._causes import failure_windows
from bench.market_day._truth import BAND, SETTLE_S, Day
from fleet_agent.fleet.spare import SPARE_MAX

__all__ = ["after_failures", "failures_line"]


def _target_at(day: Day, t: float) -> float:
    """The target of the last sample at or before `t` (the first one's before)."""
    target = day.samples[0][1] if day.samples else 0.0
    for s in day.samples:
        if s[0] > t:
            break
        target = s[1]
    return target


def after_failures(day: Day) -> list[dict[str, Any]]:
    """One entry per failure of a machine that was no bridge, after the first
    hour: its hour, what failed, its share of the target, whether the spare
    covers a machine of its size (`spared`), the minutes from the failure
    to its destroy (`destroyed_min`, None while it lived on), to the first
    machine rented after it proving (`replaced_min`), to the fleet back in
    the band (`back_min`), the minutes under the band between
    (`under_min`), and the bridges rented in that stretch."""
    step = day.step()
    out = []
    for w in failure_windows(day, "failed_at"):
        if w.start <= SETTLE_S:
            continue
        life = w.life
        target = _target_at(day, w.start)
        share = life.true_rate / target if target else 0.0
        under = sum(
            1 for t, tgt, cap, _ in day.samples if w.start <= t <= w.back and cap < (1 - BAND) * tgt
        )
        bridges = [
            other
            for other in day.lives.values()
            if other.temporary and w.start <= other.created <= w.back
        ]
        out.append(
            {
                "hour": round(w.start / 3600, 2),
                "failure": life.failure,
                "target": target,
                "share": round(share, 3),
                "spared": share <= BAND + SPARE_MAX,
                "destroyed_min": (
                    round((life.destroyed_at - w.start) / 60, 1)
                    if life.destroyed_at is not None
                    else None
                ),
                "replaced_min": round((w.proved - w.start) / 60, 1),
                "back_min": round((w.back - w.start) / 60, 1),
                "under_min": round(under * step / 60, 1),
                "bridges": len(bridges),
            }
        )
    return out


def _mean(xs: Sequence[float]) -> str:
    return f"{sum(xs) / len(xs):.1f}" if xs else "-"


def failures_line(results: Sequence[dict[str, Any]]) -> str:
    """Across days: the failures after the first hour, the minutes under the
    band each cost on the mean and in all, and for those too large to spare
    the minutes to the destroy, to the replacement proving, and under."""
    failures = [f for r in results for f in r.get("after_failures") or []]
    if not failures:
        return "no failure"
    large = [f for f in failures if not f["spared"]]
    under = [float(f["under_min"]) for f in failures]
    large_under = [float(f["under_min"]) for f in large]
    destroyed = [float(f["destroyed_min"]) for f in large if f["destroyed_min"] is not None]
    return (
        f"{len(failures)} failures: under the band {_mean(under)} min each on the mean, "
        f"{sum(under):.0f} in all; {len(large)} too large to spare: under "
        f"{_mean(large_under)} min each ({sum(large_under):.0f} in all, worst "
        f"{max(large_under, default=0):.0f}), destroyed after {_mean(destroyed)}, "
        f"replacement proving after {_mean([float(f['replaced_min']) for f in large])} min, "
        f"bridges {sum(int(f['bridges']) for f in large)}"
    )
