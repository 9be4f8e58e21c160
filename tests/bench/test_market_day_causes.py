"""The market day's minutes out of band by cause (bench/market_day/_causes.py),
on a made-up day whose every minute out has a known cause."""

from __future__ import annotations

from typing import Any

from bench.market_day._causes import CAUSES, out_of_band_causes
from bench.market_day._truth import Day, Life

STEP = 120.0
TARGET = 500.0
H = 3600.0


def _day(under: dict[tuple[float, float], float]) -> Day:
    """Samples every 2 minutes for five hours at the target, but for the
    spans of `under` ((from, to) in hours: capacity)."""
    day = Day()
    t = 0.0
    while t <= 5 * H:
        cap = next((c for (a, b), c in under.items() if round(a * H) <= t < round(b * H)), TARGET)
        day.samples.append((t, TARGET, cap, 5.0))
        t += STEP
    return day


def _life(created_h: float, rate: float, **extra: Any) -> Life:
    return Life(created=created_h * H, true_rate=rate, **extra)


def test_each_minute_out_of_band_gets_the_cause_that_explains_it() -> None:
    day = _day(
        {
            (1.5, 1.7): 400.0,  # a 100-proof machine (20 % of the target) fails
            (2.0, 2.2): 430.0,  # the hour after a change (at 2.0)
            (3.4, 3.6): 460.0,  # the second of two spareable failures
            (4.0, 4.1): 540.0,  # over the band
            (4.5, 4.6): 470.0,  # nothing the truth explains
        }
    )
    big = _life(0.0, 100.0, failed_at=1.5 * H, destroyed_at=1.5 * H, failure="offline")
    first = _life(0.0, 25.0, failed_at=3.2 * H, destroyed_at=3.2 * H, failure="prover error")
    second = _life(0.0, 25.0, failed_at=3.4 * H, destroyed_at=3.4 * H, failure="offline")
    day.lives = {
        1: big,
        2: _life(1.5, 100.0, proving_at=1.7 * H),  # its replacement
        3: first,
        4: second,
        5: _life(3.2, 25.0, proving_at=3.6 * H),  # the first one's, still loading at 3.4
        6: _life(3.4, 25.0, proving_at=3.6 * H),
        # A bridge's failure is no cause: it is no cover for the target.
        7: _life(4.5, 25.0, failed_at=4.5 * H, temporary=True),
    }
    minutes = out_of_band_causes(day, [0.0, 2.0 * H])
    assert list(minutes) == list(CAUSES)
    assert minutes == {
        "over": 6.0,
        "after_change": 12.0,
        "failure_too_large_to_spare": 12.0,
        "failures_two_at_once": 12.0,
        "failure": 0.0,
        "bad_boot": 0.0,
        "other": 6.0,
    }
    # Every minute out after hour 1 is counted once.
    out = sum(1 for t, tg, cap, _ in day.samples if t > H and abs(cap - tg) > 0.05 * tg)
    assert sum(minutes.values()) == out * STEP / 60


def test_one_failure_and_a_boot_that_hung() -> None:
    day = _day({(2.0, 2.3): 470.0, (3.0, 3.2): 470.0})
    day.lives = {
        1: _life(0.0, 25.0, failed_at=2.0 * H, destroyed_at=2.0 * H, failure="prover stuck"),
        2: _life(2.0, 25.0, proving_at=2.3 * H),
        # A replacement's boot that hung until its own replacement proved.
        3: _life(3.0, 25.0, boot="stuck", destroyed_at=3.1 * H),
        4: _life(3.1, 25.0, proving_at=3.2 * H),
    }
    minutes = out_of_band_causes(day, [0.0])
    assert minutes["failure"] == 18.0 and minutes["bad_boot"] == 12.0
    assert sum(minutes.values()) == 30.0
