"""The market day's failures paired with their replacements, and which ones
the fleet needed replaced (bench/market_day/_replacements.py), on made-up
days (the market day's target is 500 until hour 6, 800 until hour 12)."""

from __future__ import annotations

from typing import Any

from bench.market_day._replacements import replacements_of
from bench.market_day._truth import Day, Life

H = 3600.0


def _life(created_h: float, rate: float, **extra: Any) -> Life:
    return Life(created=created_h * H, true_rate=rate, proving_at=created_h * H + 1200, **extra)


def _fleet(rates: list[float]) -> dict[int, Life]:
    return {k: _life(0.0, r) for k, r in enumerate(rates, start=1)}


def test_a_failure_that_leaves_the_fleet_short_needs_its_replacement() -> None:
    day = Day()
    day.lives = _fleet([100.0] * 5)  # 500 at 500
    day.lives[9] = _life(0.0, 25.0, failed_at=2 * H, destroyed_at=2 * H, failure="offline")
    day.lives[10] = _life(2.1, 25.0)  # rented 6 minutes after
    (r,) = replacements_of(day, spare=False)
    assert r["needed"] is False and r["short_after"] == 0.0  # 500 left: at the target
    day.lives[5].failed_at = 3 * H  # a 100 fails later: 425 left of 500
    day.lives[5].failure = "prover error"
    # Its replacement rented in the step the failure was seen is no capacity
    # it had: the failure still left the fleet short.
    day.lives[11] = _life(3.0, 100.0)
    by_at = {r["at_s"]: r for r in replacements_of(day, spare=False)}
    assert by_at[3 * H]["needed"] is True and by_at[3 * H]["short_after"] == 75.0
    assert by_at[3 * H]["rented_after_s"] == 0.0


def test_a_top_up_dying_while_it_loads_at_the_level_needs_none() -> None:
    """Seed 3's case: at 800, a fleet of 808.2 with a spare for a 49.7 (the
    level 809.7) rents a 19-proof top-up that exits while it loads. The
    fleet is 1.5 short of its level, 0.2 % of the target: not a loss it
    needs replaced. Without the spare's level, none either."""
    day = Day()
    day.lives = _fleet([95.7, 49.7] + [24.8] * 26 + [18.0])  # 808.2
    day.lives[99] = _life(7.0, 19.2, failed_at=7.07 * H, destroyed_at=7.07 * H, failure="exited")
    for spare in (True, False):
        (r,) = replacements_of(day, spare=spare)
        assert r["needed"] is False and r["rented_after_s"] is None
    assert replacements_of(day, spare=True)[0]["short_after"] == 1.5
    # The 49.7 failing instead leaves 758.5: short of the target, and of the level.
    day.lives[2].failed_at = 7.5 * H
    needed = [r for r in replacements_of(day, spare=True) if r["needed"]]
    assert [r["at_s"] for r in needed] == [7.5 * H] and needed[0]["rented_after_s"] is None


def test_a_failure_that_needed_no_replacement_takes_no_rental_from_one_that_did() -> None:
    """A 100 fails in a fleet over its level at hour 1 (no replacement), a
    second at hour 2 leaves it short and is replaced at once: the rental is
    the second's, and the first has none."""
    day = Day()
    day.lives = _fleet([100.0] * 6)  # 600 at 500
    first, second = day.lives[5], day.lives[6]
    first.failed_at, first.failure = 1 * H, "offline"
    second.failed_at, second.failure = 2 * H, "offline"
    day.lives[10] = _life(2.0, 100.0)  # rented as the second was seen
    by_at = {r["at_s"]: r for r in replacements_of(day, spare=False)}
    assert by_at[1 * H]["needed"] is False and by_at[1 * H]["rented_after_s"] is None
    assert by_at[2 * H]["needed"] is True and by_at[2 * H]["rented_after_s"] == 0.0
