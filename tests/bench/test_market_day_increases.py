"""The hour after each increase of the market day's target
(bench/market_day/_increases.py), on a made-up day."""

from __future__ import annotations

from bench.market_day._increases import after_increases, increases_line
from bench.market_day._truth import Day, Life

H = 3600.0
SCHEDULE = ((0.0, 500.0), (1.5, 800.0), (3.0, 300.0), (4.0, 500.0))


def _day() -> Day:
    """Samples every 2 minutes for five hours; after the rise at 1.5 the
    fleet is at 500 for 16 minutes, then at 780 (in the band); after the
    decrease at 3 it is over; after the rise at 4 it never gets back."""
    day = Day()
    t = 0.0
    while t <= 5 * H:
        target = [x for h, x in SCHEDULE if h * H <= t][-1]
        if 1.5 * H <= t < 1.5 * H + 16 * 60:
            cap = 500.0
        elif 3 * H <= t < 3.2 * H:
            cap = 400.0  # over the band: not under it
        elif t >= 4 * H:
            cap = 300.0
        else:
            cap = target * 0.975 if t >= 1.5 * H else target
        day.samples.append((t, target, cap, 5.0))
        t += 120.0
    day.lives = {
        1: Life(created=1.5 * H + 120, temporary=True, proving_at=1.5 * H + 960),
        2: Life(created=1.5 * H + 120, temporary=True, boot="stuck"),
        3: Life(created=1.5 * H + 120, temporary=True, failed_at=1.8 * H),
        4: Life(created=1.5 * H + 120),  # cover, not a bridge
        5: Life(created=0.0, temporary=True),  # the start's, not this hour's
    }
    return day


def test_each_rise_gets_its_minutes_under_the_band_and_back() -> None:
    first, second = after_increases(_day(), SCHEDULE)
    # Samples at 1.5 h + 2, 4, ... 14 min are under (7 of them), 16 is back.
    assert first == {
        "hour": 1.5,
        "from": 500.0,
        "to": 800.0,
        "under_min": 14.0,
        "back_min": 16.0,
        "bridges": 3,
        "bridges_failed": 2,
    }
    # Under for the whole hour after 4.0, never back within it; no bridges.
    assert second["under_min"] == 60.0 and second["back_min"] is None
    assert second["bridges"] == 0
    line = increases_line([{"after_increases": [first, second]}])
    assert line == (
        "2 increases: under the band 37.0 min on the mean (worst 60), back in it after "
        "16.0 min (1 not within the hour); bridges 3, 2 hung or failed"
    )


def test_a_day_that_ends_before_a_rise_or_has_none_reads_so() -> None:
    day = _day()
    day.samples = [s for s in day.samples if s[0] <= 1.0 * H]
    assert after_increases(day, SCHEDULE) == []
    assert increases_line([{"after_increases": []}, {}]) == "no increase"
