"""The market day's oracle through a period (bench/market_day/_report.py,
`market_through`, `Day.market`): a made-up day whose oracle falls after each
change, so the ratio at the change and the ratio to the mean differ by a
known amount."""

from __future__ import annotations

from bench.market_day._report import day_report, market_through
from bench.market_day._truth import Day

H = 3600.0


def _day() -> Day:
    """Eight hours: target 500 until hour 6, then 800. The fleet costs $5/h
    then $8/h. The oracle is $4 at hour 0 and $5 from hour 0.5 on (the
    cheapest offers rented away), $8 at hour 6 and after."""
    day = Day()
    t = 0.0
    while t <= 8 * H:
        # A sample is taken after a step: the one at hour 6 is the fleet
        # before the change (bench/market_day/day.py, `_drive`).
        target, dph = (500.0, 5.0) if t <= 6 * H else (800.0, 8.0)
        day.samples.append((t, target, target, dph))
        t += 120.0
    for hour, cost, target in ((0.0, 4.0, 500.0), (6.0, 8.0, 800.0)):
        day.oracle.append({"hour": hour, "target": target, "oracle_dph": cost})
    for k in range(16):
        hour = k * 0.5
        cost = 4.0 if hour == 0 else 5.0 if hour < 6 else 8.0
        day.market.append({"hour": hour, "oracle_dph": cost})
    return day


def test_the_oracle_through_a_period_is_its_samples_from_the_change_to_the_end() -> None:
    day = _day()
    first = market_through(day, 0.0, 6.0)
    # Twelve samples (hours 0-5.5): one at $4, eleven at $5.
    assert first == {
        "market_mean_dph": round((4 + 11 * 5) / 12, 4),
        "market_low_dph": 4.0,
        "market_high_dph": 5.0,
    }
    # The sample at hour 6 belongs to the next period, not this one.
    assert market_through(day, 6.0, 8.0)["market_low_dph"] == 8.0
    assert market_through(day, 9.0, 10.0)["market_mean_dph"] is None


def test_the_report_judges_each_period_at_its_change_and_through_it() -> None:
    report = day_report("autopilot", _day(), {}, 8.0, 1.0)
    first, second = report["periods"]
    # At the change, $5 against $4: 1.25. Through the period, against $4.92.
    assert first["ratio"] == 1.25
    assert first["ratio_market_mean"] == round(5.0 / round(59 / 12, 4), 3) == 1.017
    assert second["ratio"] == second["ratio_market_mean"] == 1.0
    assert report["worst_dph_vs_market_mean"] == 1.017
    assert report["worst_dph_vs_oracle"] == 1.25


def test_a_day_without_samples_through_it_reports_none() -> None:
    day = _day()
    day.market.clear()
    report = day_report("autopilot", day, {}, 8.0, 1.0)
    assert all(p["ratio_market_mean"] is None for p in report["periods"])
    assert report["worst_dph_vs_market_mean"] is None
