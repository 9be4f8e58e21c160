"""Each failure of the market day (bench/market_day/_failures.py), on a
made-up day."""

from __future__ import annotations

from bench.market_day._failures import after_failures, failures_line
from bench.market_day._truth import Day, Life

H = 3600.0
M = 60.0


def _day() -> Day:
    """Samples every 2 minutes for four hours at a target of 300. A 40-proof
    machine (13 %, too large to spare) dies at 1.5 h; its replacement,
    rented 2 minutes later, proves 20 minutes after the failure, and the
    fleet is back in the band at the sample after. A 20-proof machine (6.7
    %, spared) fails at 3 h and costs nothing under the band; one that
    failed in the first hour does not count."""
    day = Day()
    t = 0.0
    while t <= 4 * H:
        under = 1.5 * H <= t < 1.5 * H + 22 * M
        day.samples.append((t, 300.0, 270.0 if under else 305.0, 5.0))
        t += 120.0
    day.lives = {
        1: Life(created=0.0, true_rate=40.0, failed_at=1.5 * H, destroyed_at=1.5 * H),
        2: Life(created=1.5 * H + 2 * M, true_rate=40.0, proving_at=1.5 * H + 20 * M),
        3: Life(created=1.5 * H + 2 * M, temporary=True, proving_at=1.5 * H + 14 * M),
        4: Life(created=0.0, true_rate=20.0, failed_at=3 * H, destroyed_at=3 * H + 4 * M),
        5: Life(created=3 * H + 4 * M, true_rate=20.0, proving_at=3 * H + 30 * M),
        6: Life(created=0.0, true_rate=20.0, failed_at=0.5 * H, destroyed_at=0.5 * H),
        7: Life(created=0.5 * H, true_rate=20.0, proving_at=0.8 * H),
    }
    return day


def test_each_failure_after_the_first_hour_gets_its_minutes() -> None:
    large, small = after_failures(_day())
    # Under from the failure's sample through 1.5 h + 20 min (11 samples);
    # back at + 22, the first sample in the band after the replacement proves.
    assert large == {
        "hour": 1.5,
        "failure": "",
        "target": 300.0,
        "share": 0.133,
        "spared": False,
        "destroyed_min": 0.0,
        "replaced_min": 20.0,
        "back_min": 22.0,
        "under_min": 22.0,
        "bridges": 1,
    }
    assert small["spared"] and small["under_min"] == 0.0
    assert small["destroyed_min"] == 4.0 and small["replaced_min"] == 30.0
    line = failures_line([{"after_failures": [large, small]}, {}])
    assert line == (
        "2 failures: under the band 11.0 min each on the mean, 22 in all; 1 too large to "
        "spare: under 22.0 min each (22 in all, worst 22), destroyed after 0.0, "
        "replacement proving after 20.0 min, bridges 1"
    )


def test_a_day_without_failures_reads_so() -> None:
    day = _day()
    day.lives = {k: v for k, v in day.lives.items() if v.failed_at is None}
    assert after_failures(day) == []
    assert failures_line([{"after_failures": []}, {}]) == "no failure"
