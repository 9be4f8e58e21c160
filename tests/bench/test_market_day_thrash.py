"""Thrash on the market day (bench/market_day/_report.py `thrashed_of`) is
judged on the simulator's clock, not between the bench's samples: a bridge
rented 5 s into the day and released 21.75 minutes later is no thrash,
although the samples 2 minutes apart saw it for exactly 20."""

from __future__ import annotations

from typing import Any

from bench.market_day._report import thrashed_of
from bench.market_day._truth import Day, observe

EPOCH = 1_796_406_000.0  # the simulator's clock at the day's start


def _row(iid: int, rented: float, destroyed: float | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": iid,
        "start_date": EPOCH + rented,
        "destroyed_at": None if destroyed is None else EPOCH + destroyed,
        "actual_status": "running",
        "prover_phase": "proving",
        "boot_outcome": "run",
        "dph_total": 0.3,
        "expected_proofs_per_hour": 25.0,
        "proofs_per_hour": 25.0,
        **extra,
    }


def _day(lifetimes_s: dict[int, float], step: float = 120.0) -> Day:
    """Each machine rented 5 s into the day and destroyed after its
    lifetime, sampled every `step` as the bench does."""
    day = Day()
    t = step
    while t <= max(lifetimes_s.values()) + 2 * step:
        rows = [
            _row(iid, 5.0, 5.0 + life if 5.0 + life <= t else None)
            for iid, life in lifetimes_s.items()
        ]
        observe(day, {"instances": rows}, t)
        t += step
    return day


def test_a_machine_released_as_it_came_of_age_is_no_thrash_though_the_samples_saw_20_min() -> None:
    day = _day({1: 1305.0})  # seed 2's bridges: seen at 120 s and gone at 1320 s
    life = day.lives[1]
    assert life.destroyed_at is not None and life.destroyed_at - life.created == 1200.0
    assert life.lifetime_s() == 1305.0
    assert thrashed_of(day) == []


def test_a_machine_released_younger_than_20_min_is_thrash_and_its_life_is_shown() -> None:
    day = _day({1: 1190.0, 2: 1210.0})
    (t,) = thrashed_of(day)
    assert t["id"] == 1 and t["lifetime_s"] == 1190.0


def test_failed_and_bad_boots_are_no_thrash() -> None:
    day = _day({1: 300.0, 2: 300.0})
    day.lives[1].healthy_at_destroy = False  # it had failed
    day.lives[2].boot = "boot_fail"
    assert thrashed_of(day) == []


def test_a_machine_gone_from_the_rows_is_judged_between_the_samples() -> None:
    """The simulator dropped its row: no destroy time of its own."""
    day = Day()
    observe(day, {"instances": [_row(1, 5.0)]}, 120.0)
    observe(day, {"instances": []}, 600.0)
    assert day.lives[1].lifetime_s() == 480.0
    assert [t["id"] for t in thrashed_of(day)] == [1]
