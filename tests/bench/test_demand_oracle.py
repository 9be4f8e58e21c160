"""The demand bench's foresight oracle (bench/demand_day/_oracle.py) on hand-made
instances whose optimum is worked out by hand, and the demand day itself on
a short span (bench/demand_day/day.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.demand_day import _day, day
from bench.demand_day._oracle import (
    OfferType,
    arrivals_per_slot,
    expected_lead_s,
    offer_types,
    solve,
)
from simulator.demand import DemandConfig

HOUR = 3600.0
#: Proves 10 a slot (an hour), $0.5 an hour, but only two hours after its rental.
CHEAP = OfferType("cheap", proofs_per_hour=10, dph=0.5, lead_s=2 * HOUR, available=5)
#: Proves 10 an hour from its rental, at $3 an hour.
FAST = OfferType("fast", proofs_per_hour=10, dph=3.0, lead_s=0, available=5)


def _solve(arrivals: list[int], *types: OfferType, deadline_h: float = 3) -> object:
    return solve(arrivals, list(types), slot_s=HOUR, deadline_s=deadline_h * HOUR)


def test_a_step_of_demand_is_met_by_the_cheap_slow_machines_when_the_deadline_allows() -> None:
    # 20 proofs at hour 0, due by the end of hour 2: two cheap machines rented
    # at 0 prove in hour 2 (10 each), paid 3 hours each: 2 x 3 x 0.5 = $3.
    # The fast ones would cost 2 machine-hours x $3 = $6.
    r = solve([20], [CHEAP, FAST], slot_s=HOUR, deadline_s=3 * HOUR)
    assert r.feasible and r.usd == pytest.approx(3.0)
    assert r.proofs == 20 and r.usd_per_proof == pytest.approx(0.15)
    assert r.rentals == {"cheap": {"max": 2, "machine_hours": pytest.approx(6.0)}}


def test_the_book_limits_the_cheap_type_so_the_rest_goes_to_the_fast_one() -> None:
    # One cheap machine serves 10 ($1.5); the other 10 take one fast
    # machine-hour ($3): $4.5.
    one = OfferType("cheap", 10, 0.5, 2 * HOUR, available=1)
    r = solve([20], [one, FAST], slot_s=HOUR, deadline_s=3 * HOUR)
    assert r.feasible and r.usd == pytest.approx(4.5)
    assert set(r.rentals) == {"cheap", "fast"}


def test_a_deadline_shorter_than_the_lead_time_rules_the_slow_machines_out() -> None:
    # Due by the end of hour 1; the cheap ones prove only from hour 2: two
    # fast machine-hours, $6.
    r = solve([20], [CHEAP, FAST], slot_s=HOUR, deadline_s=2 * HOUR)
    assert r.feasible and r.usd == pytest.approx(6.0)
    assert set(r.rentals) == {"fast"}


def test_warm_machines_prove_from_the_first_slot() -> None:
    # Due by the end of hour 0: only machines proving at once can serve it;
    # with two cheap ones already proving, $0.5 each for the hour.
    r = solve([20], [CHEAP], slot_s=HOUR, deadline_s=HOUR, warm={"cheap": 2})
    assert r.feasible and r.usd == pytest.approx(1.0)


def test_demand_beyond_the_book_is_reported_infeasible_not_raised() -> None:
    # At most 5 x 10 (cheap, hour 2) + 5 x 10 x 3 (fast, hours 0-2) = 200.
    assert solve([200], [CHEAP, FAST], slot_s=HOUR, deadline_s=3 * HOUR).feasible
    r = solve([201], [CHEAP, FAST], slot_s=HOUR, deadline_s=3 * HOUR)
    assert not r.feasible and "infeasible" in r.message
    assert r.usd is None and r.usd_per_proof is None
    empty = solve([1], [], slot_s=HOUR)
    assert not empty.feasible and "no offer types" in empty.message


def test_the_oracles_arrivals_are_the_simulators() -> None:
    config = DemandConfig(curve=((0.0, 600.0),), burst_rate_per_day=3, seed=None)
    slots = arrivals_per_slot(config, 7, start_minute=100, minutes=25, slot_s=600)
    assert len(slots) == 3
    assert sum(slots) == sum(len(config.arrivals(m, 7)) for m in range(100, 125))
    assert slots[0] == sum(len(config.arrivals(m, 7)) for m in range(100, 110))


def test_offer_types_group_the_book_and_lead_times_follow_the_link() -> None:
    assert expected_lead_s(100) > expected_lead_s(1000) > 4 * 60
    row = {"gpu": "RTX 4090", "num_gpus": 1, "est_proofs_per_hour": 40, "dph": 0.4}
    rows = [
        {**row, "inet_down_mbps": 1000},
        {**row, "inet_down_mbps": 950, "dph": 0.44},
        {**row, "inet_down_mbps": 50, "dph": 0.9},  # a slow link: another lead band
        {**row, "est_proofs_per_hour": 0},  # proves nothing: left out
    ]
    types = offer_types(rows)
    assert [t.available for t in types] == [2, 1]
    assert types[0].dph == pytest.approx(0.42)
    assert types[0].lead_s == pytest.approx(expected_lead_s(950))
    # Another price band is another type; past `max_types`, one type holds the rest.
    dear = {**row, "inet_down_mbps": 1000, "dph": 1.2}
    many = offer_types([*rows, dear], max_types=2)
    assert [(t.name, t.available) for t in many][1:] == [("rest", 2)]
    assert many[1].lead_s == pytest.approx(expected_lead_s(50))


def test_the_demand_day_runs_a_short_span(tmp_path: Path) -> None:
    out = tmp_path / "day.json"
    md = tmp_path / "day.md"
    args = ["--hours", "0.25", "--warmup", "0.25", "--seeds", "1"]
    assert day.main([*args, "--json-out", str(out), "--md-out", str(md)]) == 0
    [d] = json.loads(out.read_text())["days"]
    assert d["path"] == "fixed" and d["seed"] == 1
    assert d["arrived"] > 0 and d["oracle"]["arrivals"] == d["arrived"]
    assert 0 <= d["on_time_pct"] <= 100 and d["usd"] > 0
    assert d["oracle"]["feasible"] and d["oracle"]["usd_per_proof"] > 0
    assert "| fixed | 1 |" in md.read_text()
    # What two runs of the seed compare: the rentals in order, and the runs.
    assert d["clock"] == "frozen" and d["rentals"] <= len(d["rentals_path"])
    assert d["rentals_digest"] and d["runs_log"][0][1] == 1


def test_the_curve_is_moved_so_the_day_starts_at_its_start_hour() -> None:
    config = DemandConfig(curve=((0.0, 100.0), (12.0, 700.0)))
    start = 400 * 86_400 + 14.5 * 3600  # a sim clock at 14:30 UTC
    moved = _day.on_the_day(config, start, start_hour=12)
    assert moved.base_rate(start) == pytest.approx(700.0)
    assert moved.base_rate(start + 12 * 3600) == pytest.approx(100.0)
