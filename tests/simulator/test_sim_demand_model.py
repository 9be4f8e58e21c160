"""The simulator's demand model (issue 45): a daily curve of proofs/hour,
Poisson arrivals seeded per sim minute, random bursts and known events, and
a queue that provers pull earliest deadline first. The queue is driven here
with machines described directly, so every figure is exact."""

from __future__ import annotations

import math
from typing import Any

import pytest

from simulator import DemandConfig, Market, demand_from_options
from simulator.demand import parse_event
from simulator.work_queue import MachineView, WorkQueue

DAY_MIN = 1440
START = 1_800_000_000.0  # a whole sim minute


def _market(seed: int = 5) -> Market:
    return Market(
        seed=seed,
        speed=0,
        scenario_name="ideal",
        start_epoch=START,
        offer_count=200,
        rate_limits=False,
    )


def _arrived(cfg: DemandConfig, lo: float, hi: float, seed: int = 1) -> int:
    """Arrivals in sim seconds [lo, hi) (whole minutes)."""
    return sum(len(cfg.arrivals(m, seed)) for m in range(int(lo // 60), int(hi // 60)))


@pytest.mark.parametrize("steps", [(60,), (120,), (37, 83), (3600,)])
def test_the_same_seed_gives_the_same_arrivals_whatever_the_step(steps: tuple[int, ...]) -> None:
    cfg = DemandConfig(curve=((0.0, 300.0), (12.0, 900.0)), burst_rate_per_day=4)
    reference = _market()
    reference.set_demand(cfg)
    reference.advance(6 * 3600)
    market = _market()
    market.set_demand(cfg)
    i = 0
    while market.now() < START + 6 * 3600:
        market.advance(min(steps[i % len(steps)], START + 6 * 3600 - market.now()))
        i += 1
    want, got = reference.demand_state(), market.demand_state()
    assert want is not None and got is not None
    assert want["arrived"] > 1000
    assert got == want
    assert market.demand_body() == reference.demand_body()
    other = _market(seed=6)
    other.set_demand(cfg)
    other.advance(6 * 3600)
    assert other.demand_body() != reference.demand_body()


def test_arrivals_average_the_curve_over_days() -> None:
    # Up from 100/h at midnight to 700/h at noon and back: 9,600 a day.
    cfg = DemandConfig(curve=((0.0, 100.0), (12.0, 700.0)))
    assert cfg.base_rate(6 * 3600) == pytest.approx(400.0)
    assert cfg.base_rate(18 * 3600) == pytest.approx(400.0)  # across midnight
    days = 3
    expected = 9600.0 * days
    got = _arrived(cfg, 0, days * 86400)
    # A Poisson count: within 5 standard deviations (a 1-in-3-million miss).
    assert abs(got - expected) < 5 * math.sqrt(expected), (got, expected)
    # And per six hours, against the curve's integral there (3 x 6 h quarters).
    night = _arrived(cfg, 0, 6 * 3600) + _arrived(cfg, 86400, 86400 + 6 * 3600)
    night_expected = 2 * 6 * (100.0 + 400.0) / 2
    assert abs(night - night_expected) < 5 * math.sqrt(night_expected), night


def test_a_known_event_raises_arrivals_in_its_window_only() -> None:
    flat = DemandConfig(curve=((0.0, 300.0),))
    event = DemandConfig(curve=((0.0, 300.0),), events=(parse_event("14:00-16:00x3"),))
    window = (14 * 3600, 16 * 3600)
    before = (11 * 3600, 13 * 3600)
    assert _arrived(event, *window) > 2 * _arrived(flat, *window)
    # Outside the window the same seed draws the very same arrivals.
    assert event.arrivals(12 * 60, 1) == flat.arrivals(12 * 60, 1)
    assert _arrived(event, *before) == _arrived(flat, *before)
    assert event.rate(15 * 3600, 1) == pytest.approx(900.0)


def test_random_bursts_raise_arrivals_while_they_last() -> None:
    calm = DemandConfig(curve=((0.0, 300.0),))
    bursty = DemandConfig(curve=((0.0, 300.0),), burst_rate_per_day=3, burst_multiplier=4)
    bursts = [b for day in range(5) for b in bursty.bursts(day, 1)]
    assert bursts and all(1 < mult <= 4 for _, _, mult in bursts)
    assert bursty.bursts(2, 1) == bursty.bursts(2, 1)  # seeded
    start, end, mult = bursts[0]
    lo, hi = math.ceil(start / 60) * 60, math.floor(end / 60) * 60
    assert _arrived(bursty, lo, hi) > 1.3 * _arrived(calm, lo, hi)
    assert bursty.rate((lo + hi) / 2, 1) >= 300.0 * mult


def _machine(mid: int, *, spp: float = 600.0, slots: int = 1, pulls: bool = True) -> MachineView:
    return MachineView(mid, pulls, pulls, False, slots, spp, 100.0)


def _check_books(q: WorkQueue) -> None:
    r = q.report()
    assert r["arrived"] == r["done"] + r["expired"] + r["queued"] + r["in_flight"]
    assert r["done"] == r["done_on_time"] + r["late"]


def test_provers_pull_the_earliest_deadline_first_and_a_lost_item_goes_back() -> None:
    q = WorkQueue(DemandConfig(curve=((0.0, 600.0),), expire_minutes=0), seed=3, next_minute=0)
    for minute in range(5):  # no machine yet: a backlog of about 50
        q.tick(minute, [])
    assert q.report()["queued"] > 20
    slow, fast = _machine(1, spp=10_000.0), _machine(2, spp=30.0)
    q.tick(5, [slow, fast])
    # The slow one pulled first (lowest id), so it holds the very first item.
    (held,) = q.holding(1)
    assert held.id == 1
    for minute in range(6, 10):
        q.tick(minute, [slow, fast])
        (item,) = q.holding(2)
        # Earliest deadline first: only the slow one's item is due before it.
        assert q.deadlines()[:2] == [held.deadline, item.deadline]
        _check_books(q)
    # The slow machine is destroyed: its item goes back to the head of the
    # queue, and the fast one proves it next (it is not lost).
    done = q.report()["done"]
    q.tick(10, [fast])
    assert q.report()["returned"] == 1
    assert held.deadline not in q.deadlines()
    assert q.report()["done"] > done
    (item,) = q.holding(2)
    assert item.deadline == q.deadlines()[0]
    _check_books(q)


def test_a_fleet_too_small_proves_late_and_a_big_enough_one_on_time() -> None:
    cfg = DemandConfig(curve=((0.0, 120.0),))  # two a minute, 30 minutes each
    small = WorkQueue(cfg, seed=9, next_minute=0)
    big = WorkQueue(cfg, seed=9, next_minute=0)
    for minute in range(240):
        small.tick(minute, [_machine(1, spp=60.0)])  # one a minute: half the demand
        big.tick(minute, [_machine(i, spp=60.0, slots=2) for i in range(1, 3)])
    _check_books(small)
    _check_books(big)
    s, b = small.report(), big.report()
    assert s["late"] > 0 and s["expired"] > 0
    assert s["queued"] > 0
    assert b["late"] == b["expired"] == 0 and b["done_on_time"] > 400
    assert b["idle_machine_seconds"] > 0


def test_a_stuck_prover_holds_its_work_and_finishes_none() -> None:
    q = WorkQueue(DemandConfig(curve=((0.0, 60.0),)), seed=2, next_minute=0)
    q.tick(0, [_machine(1, spp=30.0)])
    q.tick(1, [_machine(1, spp=30.0)])
    done = q.report()["done"]
    stuck = MachineView(1, True, False, True, 1, 30.0, 100.0)
    for minute in range(2, 6):
        q.tick(minute, [stuck])
    assert q.report()["done"] == done
    assert q.prover_fields(1, 100.0)["proofs_completed"] == done


def test_settings_parse_from_json_and_the_command_line() -> None:
    cfg = demand_from_options("0:100,14:800", ["14:00-16:00x3"], 2.0, 20.0, 7)
    assert cfg is not None
    assert cfg.curve == ((0.0, 100.0), (14.0, 800.0))
    assert (cfg.deadline_minutes, cfg.expire_minutes, cfg.seed) == (20.0, 40.0, 7)
    assert DemandConfig.from_dict(cfg.to_dict()) == cfg
    assert demand_from_options(None) is None
    bads: list[dict[str, Any]] = [
        {"curve": [[25, 1]]},
        {"curve": []},
        {"deadline": 3},
        {"events": ["9-10x2"]},
    ]
    for bad in bads:
        with pytest.raises(ValueError):
            DemandConfig.from_dict(bad)


def test_a_listed_machine_that_stops_proving_gives_its_work_back() -> None:
    q = WorkQueue(DemandConfig(curve=((0.0, 60.0),)), seed=4, next_minute=0)
    q.tick(0, [])
    q.tick(1, [_machine(1, spp=10_000.0)])
    assert len(q.holding(1)) == 1
    dead = MachineView(1, False, False, False, 1, 10_000.0, 100.0)  # killed, still listed
    q.tick(2, [dead])
    assert q.holding(1) == [] and q.report()["returned"] == 1
    assert q.prover_fields(1, 100.0)["proofs_in_flight"] == 0
    _check_books(q)
