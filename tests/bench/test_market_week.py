"""The market week (bench/market_week/): its oracle on hand-made instances
whose optimum is worked out by hand, the work it may win, the market-only
run's determinism, and the harness's tables and JSON on a one-day run."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from bench.demand_day._oracle import OfferType
from bench.market_week import week
from bench.market_week._market_only import (
    BENCH_NODE,
    WALLET,
    WEEK_EPOCH,
    MarketRun,
    Request,
    WeekSetup,
    run_market,
)
from bench.market_week._oracle import Segment, WeekOracle, pool, solve
from simulator.curio.fil import ATTO_PER_NFIL
from simulator.snark_market import NodeConfig, SimulatedProver, SnarkMarket

STEP = 900.0  # 15 minutes: the deadline (45 min) is 3 steps
#: One machine proving 4 P an hour (1 a step) for $1 an hour ($0.25 a step).
ONE = OfferType("one", proofs_per_hour=4.0, dph=1.0, lead_s=0.0, available=1)
#: 1 P paying 2 FIL: $2 at 1 $/FIL.
TWO_DOLLARS = 2e9


def _solve(work: list[list[Segment]], *types: OfferType, **kw: Any) -> WeekOracle:
    args: dict[str, Any] = {
        "step_s": STEP,
        "fil_usd": 1.0,
        "start_challenges": 500,
    }
    return solve(work, list(types), **(args | kw))


def test_the_oracle_proves_what_pays_and_pays_only_the_machine_steps_it_needs() -> None:
    # 1 P worth $2 in step 0: one machine-step ($0.25) proves it: $1.75.
    r = _solve([[Segment(1.0, 1, TWO_DOLLARS)], [], [], []], ONE)
    assert r.feasible and r.profit_usd == pytest.approx(1.75)
    assert r.days[0]["proofs"] == pytest.approx(1.0)
    assert r.days[0]["usd_per_proof"] == pytest.approx(0.25)


def test_work_beyond_the_deadline_is_left_and_work_below_the_machine_s_cost_too() -> None:
    # 5 P in step 0, one machine: it proves 1 a step, and the P taken in
    # step 0 must be proved by the end of step 3: 4 P, $8 - 4 x $0.25 = $7.
    # Without the deadline it would prove all 5 ($8.75).
    r = _solve([[Segment(5.0, 5, 5 * TWO_DOLLARS)], [], [], []], ONE)
    assert r.profit_usd == pytest.approx(7.0)
    # At 0.2 FIL a P ($0.2 < $0.25 a machine-step) nothing pays: nothing is rented.
    cheap = _solve([[Segment(1.0, 1, 0.2e9)], [], [], []], ONE)
    assert cheap.profit_usd == pytest.approx(0.0) and cheap.rentals == {}


def test_a_machine_rented_with_a_lead_time_is_paid_while_it_loads() -> None:
    # Not warm, 30 minutes (2 steps) from rental to proving: rented at step 0,
    # it proves in step 2 (within the deadline): 3 steps paid, $2 - $0.75.
    slow = dataclasses.replace(ONE, lead_s=1800.0)
    r = _solve([[Segment(1.0, 1, TWO_DOLLARS)], [], [], []], slow, warm=False)
    assert r.profit_usd == pytest.approx(1.25)
    assert r.rentals["one"]["machine_hours"] == pytest.approx(0.75)


def test_without_slots_the_oracle_first_proves_the_challenges_that_earn_one() -> None:
    # No slot at the start; a slot feeds one GPU (here 1 P a step). 4 P
    # come at step 40, due by the end of step 43: a whole slot in each of
    # those steps, so 50 challenge proofs by the end of step 39 (50
    # machine-steps of the 8 machines), then 4 machine-steps of paid work.
    eight = dataclasses.replace(ONE, available=8)
    work: list[list[Segment]] = [[] for _ in range(41)]
    work[40] = [Segment(4.0, 4, 4 * 100 * TWO_DOLLARS)]
    r = _solve(work, eight, start_challenges=0)
    assert r.feasible and r.challenge_proofs == pytest.approx(50.0)
    assert r.profit_usd == pytest.approx(800 - 54 * 0.25)
    # Given the slot, only the paid proofs' steps are paid.
    given = _solve(work, eight, start_challenges=50)
    assert given.profit_usd == pytest.approx(800 - 4 * 0.25)
    assert given.challenge_proofs == pytest.approx(0.0)


def test_no_offer_types_is_a_result_not_an_error() -> None:
    r = _solve([[Segment(1.0, 1, TWO_DOLLARS)]])
    assert not r.feasible and "no offer types" in r.message


def _run(price: int, requests: list[Request], *, enabled: bool = True) -> MarketRun:
    return MarketRun(1, 4, price, enabled, 800, requests=requests)


def test_the_work_the_oracle_may_win_is_what_went_unserved_to_us_or_to_dearer_asks() -> None:
    q = 5_000_000
    mine = Request(10.0, 1.0, 8_000_000, q, ours=True)
    dearer = Request(20.0, 1.6, 8_000_000, 6_000_000)
    cheaper = Request(30.0, 1.0, 8_000_000, 4_000_000)  # its provider is first: not ours
    unserved = Request(40.0, 1.0, 9_000_000, None)
    later = Request(STEP + 1, 1.0, 7_000_000, None)
    run = _run(q, [mine, dearer, cheaper, unserved, later])
    [step0, step1] = pool([run], q, 2, STEP, segments=2)
    assert sum(s.count for s in step0) == 3 and sum(s.p for s in step0) == pytest.approx(3.6)
    # Best paid first: 9 M and 8 M x 1.6 (one band), then 8 M.
    assert [s.count for s in step0] == [1, 2]
    assert step0[0].pay_nfil == pytest.approx(9_000_000)
    assert sum(s.pay_nfil for s in step1) == pytest.approx(7_000_000)
    # Each step takes the run worth most in it; runs at other prices are skipped.
    richer = _run(q, [Request(5.0, 1.0, 30_000_000, None)])
    other = _run(q + 1, [Request(5.0, 1.0, 99_000_000, None)])
    alone = _run(0, [Request(5.0, 1.0, 10_000_000, 7_000_000)], enabled=False)
    [step0, step1] = pool([run, richer, other, alone], q, 2, STEP)
    assert sum(s.pay_nfil for s in step0) == pytest.approx(30_000_000)
    assert sum(s.pay_nfil for s in step1) == pytest.approx(7_000_000)


def test_a_market_only_day_is_the_same_for_a_seed_and_another_for_another() -> None:
    setup = WeekSetup(days=1)
    a = run_market(setup, 3, 2, 5_000_000)
    b = run_market(setup, 3, 2, 5_000_000)
    assert a.days == b.days and a.requests == b.requests
    assert a.days[0].paid_proofs > 0 and a.days[0].revenue_fil > 0
    assert a.days[0].over_slots == 0 and a.days[0].penalties == 0
    c = run_market(setup, 4, 2, 5_000_000)
    assert c.requests != a.requests


def test_the_bench_node_keeps_the_market_s_history() -> None:
    """BENCH_NODE's shorter bookkeeping periods change no request, ask,
    proof or payment (bench/market_week/_market_only.py)."""

    def history(node: NodeConfig) -> tuple[object, ...]:
        now = [WEEK_EPOCH]
        config = dataclasses.replace(WeekSetup().market_config(3), node=node)
        market = SnarkMarket(config, clock=lambda: now[0], seed=2, prover=SimulatedProver(3))
        market.set_meta(True, WALLET, 5_000_000 * ATTO_PER_NFIL)
        now[0] += 5 * 3600
        market.sync()
        acc = market.node_account()
        assert acc is not None
        assigned = [(r.cid, r.provider, r.state) for r in market.service.requests.values()]
        return (
            acc.paid_proofs,
            acc.cumulative_atto,
            acc.challenges,
            dict(market.service.counts),
            assigned,
        )

    assert history(BENCH_NODE) == history(NodeConfig())


def test_the_harness_writes_its_tables_and_json_for_a_day(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, md = tmp_path / "week.json", tmp_path / "week.md"
    args = ["--seeds", "2", "--days", "1", "--gpus", "2,4", "--prices", "5000000"]
    assert week.main([*args, "--json-out", str(out), "--md-out", str(md)]) == 0
    data = json.loads(out.read_text())
    [seed] = data["seeds"]
    fixed, oracle = seed["paths"]["fixed"], seed["paths"]["oracle"]
    assert fixed["available"] and oracle["available"]
    assert fixed["gpus"] in (2, 3, 4) and len(fixed["days"]) == len(oracle["days"]) == 1
    assert {r["gpus"] for r in fixed["sweep"]} == {2, 3, 4}
    assert seed["book"]["usd_gpu_h"] > 0
    # The oracle bounds the fixed fleet.
    assert oracle["days"][0]["profit_usd"] >= fixed["days"][0]["profit_usd"]
    summ = data["summary"]
    assert summ["days"] == [1, 1] and summ["oracle_below"] == []
    assert summ["paths"]["fixed"]["targets"]["0 penalties"] is True
    assert 0 < summ["paths"]["fixed"]["profit_vs_oracle"] <= 1
    printed = capsys.readouterr().out
    assert "| day | fixed profit $ |" in printed and "market week — seed 2" in printed
    assert "## Seed 2" in md.read_text() and "## Summary" in md.read_text()


def test_a_path_that_cannot_run_is_reported_not_available_not_faked() -> None:
    day = {
        "day": 1,
        "paid_proofs": 10,
        "profit_usd": 1.0,
        "rental_usd": 1.0,
        "transfer_usd": 0.0,
        "llm_usd": 0.0,
        "usd_per_proof": 0.1,
        "penalties": 0,
        "over_slots": 0,
    }
    seeds = [
        {
            "seed": 1,
            "paths": {
                "oracle": {"available": True, "days": [dict(day, profit_usd=2.0)]},
                "autopilot": {"available": False, "why": "no FleetProver"},
            },
        }
    ]
    summ = week.summary(seeds, ["oracle", "autopilot"], 1)
    assert summ["paths"]["autopilot"] == {"available": False, "why": "no FleetProver"}
    lines = week.seed_table(seeds[0], ["oracle", "autopilot"])
    assert "autopilot: not available: no FleetProver" in "\n".join(lines)
    assert all("autopilot profit" not in line for line in lines)


def test_the_agent_paths_are_available_and_run_the_stack_s_market_setup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every agent path can run now (but where the machine lacks
    libfaketime: then that is the only reason given); a worker without
    market activities leaves the market paths unavailable, not the
    demand path; the paths carry the local stack's market choices."""
    from bench.market_week._agent import AGENT_PATHS, agent_settings, availability
    from starter.stack.market import STACK_MIN_TARGET, STACK_PRICE_RANGE_NFIL
    from testkit import agents

    for path in AGENT_PATHS:
        why = availability(path)
        assert why is None or (why.startswith("no frozen clock") and ";" not in why), (path, why)

    @contextlib.asynccontextmanager
    async def without_market(client: Any, store: Any, *, demand: Any = None) -> Any:
        yield None

    monkeypatch.setattr(agents, "running_worker", without_market)
    assert "no market activities" in (availability("autopilot") or "")
    assert "no market activities" not in (availability("demand") or "")
    monkeypatch.undo()

    setup = WeekSetup(days=1)
    auto, demand = agent_settings("autopilot", setup), agent_settings("demand", setup)
    assert auto["market_mode"] == "snark" and "market_mode" not in demand
    assert (auto["market_min_price_nfil"], auto["market_max_price_nfil"]) == STACK_PRICE_RANGE_NFIL
    assert auto["market_challenges"] == setup.challenges and auto["fil_usd"] == setup.fil_usd
    assert auto["min_target"] == demand["min_target"] == STACK_MIN_TARGET
    assert auto["target_mode"] == demand["target_mode"] == "demand"
    assert demand["max_target"] == 1400.0  # twice the curve's peak (700)
