"""Where the market day's time out of the ±5 % band went, by cause, from the
simulator's truth (bench/market_day/day.py): the hour after each target change,
then failures (of a machine too large to spare, two at once, or one), boots
that hung or failed, and what is left. Each cause's minutes, and their sum
is the day's time out of band after the first hour."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bench.market_day._truth import BAND, SETTLE_S, Day, Life, in_band
from fleet_agent.fleet.spare import SPARE_MAX

__all__ = ["CAUSES", "Window", "failure_windows", "out_of_band_causes"]

#: The causes, in the order a sample under the band is given one.
CAUSES = (
    "over",
    "after_change",
    "failure_too_large_to_spare",
    "failures_two_at_once",
    "failure",
    "bad_boot",
    "other",
)


@dataclass(frozen=True)
class Window:
    """A failure's or a bad boot's stretch of the day (`failure_windows`)."""

    start: float  # the failure, or the bad boot's rental
    proved: float  # the first machine rented after it went proves (or the day's end)
    back: float  # the fleet is next inside the band after both (or the day's end)
    life: Life


def failure_windows(day: Day, start_of: str) -> list[Window]:
    """One window for each non-temporary machine that failed (`start_of`
    "failed_at") or whose boot hung or failed ("created"): from then until
    the first machine rented after it went proves and the fleet is inside
    the band again (or the day's end): its cover may take several machines,
    and while it loads the spare is spent, so a second failure then is two
    at once."""
    inside = [t for t, target, cap, _ in day.samples if in_band(target, cap)]
    end = day.samples[-1][0] if day.samples else 0.0
    fresh = sorted(
        (life for life in day.lives.values() if not life.temporary), key=lambda life: life.created
    )
    out = []
    for life in fresh:
        if start_of == "failed_at":
            start = life.failed_at
        else:
            start = life.created if life.boot != "run" else None
        if start is None:
            continue
        gone = max(start, life.destroyed_at if life.destroyed_at is not None else start)
        proved = next(
            (n.proving_at for n in fresh if n.created >= gone and n.proving_at is not None), end
        )
        back = next((t for t in inside if t > max(gone, proved)), end)
        out.append(Window(start, proved, back, life))
    return out


def out_of_band_causes(day: Day, changes: Sequence[float]) -> dict[str, float]:
    """Minutes out of band after the first hour, by cause (CAUSES): over the
    band's top; under it in the hour after a target change (the cover
    loading: `within_5pct_settled` leaves that hour out); else from a
    failure until the fleet is back in the band — one of a
    machine larger than the spare covers ((BAND + SPARE_MAX) × target), two
    or more together, or one; else while a boot that hung or failed holds
    its place; else other."""
    step = day.step()
    failures = failure_windows(day, "failed_at")
    boots = failure_windows(day, "created")
    minutes = dict.fromkeys(CAUSES, 0.0)
    for t, target, cap, _ in day.samples:
        if t <= SETTLE_S or in_band(target, cap):
            continue
        if cap > target:
            cause = "over"
        elif any(c <= t < c + SETTLE_S for c in changes):
            cause = "after_change"
        else:
            open_ = [w.life for w in failures if w.start <= t <= w.back]
            if any(life.true_rate > (BAND + SPARE_MAX) * target for life in open_):
                cause = "failure_too_large_to_spare"
            elif len(open_) > 1:
                cause = "failures_two_at_once"
            elif open_:
                cause = "failure"
            elif any(w.start <= t <= w.back for w in boots):
                cause = "bad_boot"
            else:
                cause = "other"
        minutes[cause] += step / 60
    return {k: round(v, 1) for k, v in minutes.items()}
