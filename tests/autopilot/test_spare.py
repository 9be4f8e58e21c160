"""A spare for one failure: the fleet holds enough that losing any one of its
machines leaves it inside the ±5 % band, for every machine small enough for
that to fit in the band."""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from datetime import UTC, datetime

import pytest

from fleet_agent.autopilot.policy import choose_offers, plan_fleet
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.fleet.oracle import Item, cheapest_cover
from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.fleet.spare import BAND, SPARE_MAX, cheapest_spared_cover, hold_level
from fleet_agent.fleet.triage import hold_of
from fleet_agent.llm.prompt import context_message, limits_text
from fleet_agent.models import AgentConfig
from fleet_agent.policy.band import TOP_MARGIN
from tests.helpers.policy_rows import machine, offer, trade_check


def test_the_level_leaves_the_fleet_in_band_after_losing_one_machine() -> None:
    # 25 proofs/h is 8.3 % of 300: hold 310, and 310 − 25 = 285 = 300 × 0.95.
    assert hold_level(300, [25, 25, 10]) == pytest.approx(310)
    assert hold_level(300, [25, 25, 10]) - 25 == pytest.approx((1 - BAND) * 300)
    # A machine of at most 5 % of the target needs no spare.
    assert hold_level(500, [25, 20]) == 500
    # One of more than 8.5 % (BAND + SPARE_MAX) is not spared: it does not
    # count, and the level is set by the largest machine that is.
    assert hold_level(300, [97, 49, 25.8, 25.2, 24]) == pytest.approx(310.2)
    assert hold_level(300, [97, 49, 25.8]) == 300
    assert hold_level(300, [25.5]) <= (1 + SPARE_MAX) * 300
    # Off, no machines, no target: the target.
    assert hold_level(300, [25], spare=False) == 300
    assert hold_level(300, []) == 300
    assert hold_level(0, [25]) == 0


def test_the_plan_rents_the_spare_and_releases_down_to_the_level_not_the_target() -> None:
    fleet = [machine(i, 25.0) for i in range(1, 13)]  # 300 proofs/h
    plan = plan_fleet(fleet, 300, spare=True)
    assert plan.hold == pytest.approx(310) and plan.gap == pytest.approx(10)
    assert plan.destroy == []
    # Without the spare the fleet is on target.
    assert plan_fleet(fleet, 300).gap == 0
    # Twelve 25s and two 10s (320) at target 298, holding 308.1: one 10 goes
    # with the spare (310 left), both without it (300 left; the knapsack
    # rounds rates down, so an exact fit of 300 would be off by a hair).
    bigger = [machine(i, 25.0) for i in range(1, 13)] + [
        machine(13, 10.0, dph=0.2),
        machine(14, 10.0, dph=0.2),
    ]
    assert len(plan_fleet(bigger, 298).destroy) == 2
    kept = plan_fleet(bigger, 298, spare=True)
    assert len(kept.destroy) == 1 and kept.expected_after == pytest.approx(310)


def test_a_spare_is_not_held_past_the_band() -> None:
    """The market day's seed 2 after the drop to 300: machines of 230, 46, 25.3
    and 24. Holding 310.3 needs all four (325.6, past 315); the target alone
    needs three (300.3): the 25.3 goes, as it would without the spare."""
    rows = [
        machine(1, 230.0, dph=2.14),
        machine(2, 46.0, dph=0.34),
        machine(3, 25.3, dph=0.22),
        machine(4, 24.3, dph=0.21),
    ]
    plan = plan_fleet(rows, 300, spare=True)
    assert plan.hold == pytest.approx(310.3)
    assert plan.destroy == [(3, "not needed for the target")]
    assert plan.expected_after == pytest.approx(300.3)


def test_failed_machines_do_not_count_towards_the_level() -> None:
    # A not-proving 28-proof machine would raise the level to 313; it is
    # going, so the level is set by the healthy 25-proof ones.
    rows = [machine(i, 25.0) for i in range(1, 12)]
    rows.append(machine(99, 28.0, state="not_proving", note="stuck prover"))
    assert hold_of(rows, 300, spare=True) == pytest.approx(310)
    plan = plan_fleet(rows, 300, spare=True)
    assert [iid for iid, _ in plan.destroy] == [99]
    assert plan.gap == pytest.approx(310 - 275)


def test_the_spare_is_bought_only_inside_the_band() -> None:
    # Fleet at 300 holding 310: a 10-proof machine fits (ends 310, +3.3 %).
    offers = [offer(1, 49.7, 0.30), offer(2, 10.0, 0.12)]
    assert [o["offer_id"] for o in choose_offers(offers, 10, 300, hold=310)] == [2]
    # Only a 24.8 machine: 324.8 is past 315, and the fleet is on target, so
    # the spare's gap is left open rather than bought past the band.
    assert choose_offers([offer(3, 24.8, 0.2)], 10, 300, hold=310) == []
    # 5 under the target (15 under the level) with an 8-proof offer too: the
    # level cannot be met inside the band, the target can: the 8 is rented.
    picks = choose_offers([offer(3, 24.8, 0.2), offer(4, 8.0, 0.09)], 15, 300, hold=310)
    assert [o["offer_id"] for o in picks] == [4]
    # 40 short of the level (30 of the target): covered, past it if it must be.
    assert [o["offer_id"] for o in choose_offers([offer(3, 49.7, 0.4)], 40, 300, hold=310)] == [3]


def test_the_model_and_the_autopilot_are_told_the_level() -> None:
    on, off = AgentConfig(target_proofs_per_hour=300), AgentConfig(spare_one_machine=False)
    assert "spare for one failure: on" in limits_text(on)
    assert "spare for one failure" not in limits_text(off)
    snap = FleetSnapshot(
        target_proofs_per_hour=300, expected_proofs_per_hour=300, hold_proofs_per_hour=310
    )
    assert "hold 310 proofs/h" in snap.to_text()
    level = snap.model_copy(update={"hold_proofs_per_hour": 300.0})
    assert "hold" not in level.to_text()


async def test_the_autopilot_searches_for_the_spare_when_it_is_on() -> None:
    """The autopilot reads the Limits line: on target with the spare on, it
    searches (a 10 proofs/h gap); with it off, it does nothing (the trades'
    check pending: a settled fleet looks for one every half hour, trade.py)."""
    snap = FleetSnapshot(
        instances=[],
        target_proofs_per_hour=300,
        expected_proofs_per_hour=300,
    )
    rows = [machine(i, 25.0) for i in range(1, 13)]
    fleet_text = snap.to_text().split("\n")[0] + "\n```json\n" + json.dumps(rows) + "\n```"
    tools = [{"name": n} for n in ("search_offers", "create_instance", "destroy_instance")]
    on = AgentConfig(target_proofs_per_hour=300)
    off = on.model_copy(update={"spare_one_machine": False})
    for config, searches in ((on, True), (off, False)):
        text = context_message(
            run=1,
            session=1,
            now=datetime(2026, 11, 30, tzinfo=UTC),
            trigger_block="Trigger: heartbeat (nothing else happened).",
            fleet_text=fleet_text,
            config=config,
            wakes=[trade_check()],
            next_heartbeat_at=None,
        )
        reply = await AutopilotProvider().complete(
            system="s", messages=[{"role": "user", "content": text}], tools=tools, max_tokens=100
        )
        names = [b["name"] for b in reply.content if b["type"] == "tool_use"]
        assert names == (["search_offers"] if searches else []), config.spare_one_machine
        if not searches:
            assert re.search(r"no action needed", reply.content[0]["text"])


def _spared_brute_force(items: list[Item], target: float) -> float:
    """The cheapest subset holding its own level, by enumeration."""
    best = math.inf
    for n in range(len(items) + 1):
        for combo in itertools.combinations(items, n):
            rates = [i.rate for i in combo]
            if sum(rates) >= hold_level(target, rates):
                best = min(best, sum(i.cost for i in combo))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_the_spared_oracle_is_as_cheap_as_brute_force_and_holds_its_level(seed: int) -> None:
    rng = random.Random(seed)
    target = float(rng.choice([100, 200, 300]))
    # Whole proofs/h (the knapsack's unit), many of them small enough to spare.
    items = [
        Item(key=k, cost=round(rng.uniform(0.1, 3.0), 3), rate=float(rng.randint(4, 60)))
        for k in range(rng.randint(1, 11))
    ]
    cover = cheapest_spared_cover(items, target, unit=1.0)
    expected = _spared_brute_force(items, target)
    assert cover.met == (expected < math.inf)
    if cover.met:
        assert cover.cost == pytest.approx(expected)
        rates = [i.rate for i in items if i.key in cover.keys]
        assert sum(rates) >= hold_level(target, rates)
        # Never cheaper than the cover of the target alone.
        assert cover.cost >= cheapest_cover(items, target, 1.0).cost - 1e-9


def test_the_spared_oracle_pays_for_the_spare() -> None:
    # Target 300: fifteen 20-proof machines meet it, but losing one leaves
    # 280 (6.7 % under); a 5-proof machine more holds 305 = 0.95 × 300 + 20.
    items = [Item(k, cost=1.0, rate=20) for k in range(16)] + [Item(99, cost=0.3, rate=5)]
    assert cheapest_cover(items, 300, 1.0).cost == pytest.approx(15.0)
    spared = cheapest_spared_cover(items, 300, 1.0)
    assert spared.cost == pytest.approx(15.3) and 99 in spared.keys


def _brute_force_joint(items: list[Item], target: float, held: list[float]) -> float:
    """The cheapest subset whose fleet with `held` holds its own level."""
    best = math.inf
    for n in range(len(items) + 1):
        for combo in itertools.combinations(items, n):
            rates = held + [i.rate for i in combo]
            if sum(rates) >= hold_level(target, rates):
                best = min(best, sum(i.cost for i in combo))
    return best


@pytest.mark.parametrize("seed", range(40))
def test_the_joint_spared_cover_is_as_cheap_as_brute_force(seed: int) -> None:
    rng = random.Random(1000 + seed)
    target = float(rng.choice([100, 200, 300]))
    held = [float(rng.randint(4, 60)) for _ in range(rng.randint(0, 5))]
    items = [
        Item(key=k, cost=round(rng.uniform(0.1, 3.0), 3), rate=float(rng.randint(4, 60)))
        for k in range(rng.randint(1, 10))
    ]
    cover = cheapest_spared_cover(items, target, unit=1.0, held=held)
    expected = _brute_force_joint(items, target, held)
    assert cover.met == (expected < math.inf)
    if cover.met:
        assert cover.cost == pytest.approx(expected)
        rates = held + [i.rate for i in items if i.key in cover.keys]
        assert sum(rates) >= hold_level(target, rates)


def test_one_cover_rents_the_target_and_its_spare_together() -> None:
    """The market day's seed 3 at hour 0, in small: from an empty fleet the
    cover of the target alone (twelve 25.1s, 301.2) needs a second rental for the
    spare, and the cheapest machine for that small gap is a dear one; the
    joint cover takes a 10 at once. The next plan then has no gap."""
    offers = [offer(k, 25.1, 0.25) for k in range(1, 13)]
    offers += [offer(20, 10.0, 0.30), offer(21, 30.0, 0.90)]
    empty = plan_fleet([], 300, spare=True)
    assert empty.hold == 300 and empty.held == ()
    # Without the fleet's rates the first cover is the target's alone ...
    alone = choose_offers(offers, empty.gap, 300, hold=empty.hold)
    assert sorted(o["offer_id"] for o in alone) == list(range(1, 13))
    after = plan_fleet([machine(o["offer_id"], 25.1, dph=0.25) for o in alone], 300, spare=True)
    assert after.gap == pytest.approx(8.9)  # ... and the spare is a second rental.
    # With them, one cover holds the level of the fleet it makes.
    joint = choose_offers(offers, empty.gap, 300, hold=empty.hold, held=empty.held)
    assert sorted(o["offer_id"] for o in joint) == [*range(1, 13), 20]
    rows = [machine(o["offer_id"], o["est_proofs_per_hour"], dph=o["dph"]) for o in joint]
    assert plan_fleet(rows, 300, spare=True).gap <= 0


def test_a_cover_that_brings_a_larger_spared_machine_covers_its_spare_too() -> None:
    """A fleet of 280 in 14 machines of 20 holds 305 (0.95 × 300 + 20): a
    gap of 25. A single 25 would meet the gap and raise the level to 310,
    5 short again; the joint cover takes what holds the level it makes."""
    fleet = [machine(i, 20.0, dph=0.2) for i in range(1, 15)]
    plan = plan_fleet(fleet, 300, spare=True)
    assert plan.hold == pytest.approx(305) and plan.gap == pytest.approx(25)
    offers = [offer(1, 25.0, 0.20), offer(2, 20.0, 0.21), offer(3, 5.1, 0.07)]
    assert [o["offer_id"] for o in choose_offers(offers, plan.gap, 300, hold=plan.hold)] == [1]
    joint = choose_offers(offers, plan.gap, 300, hold=plan.hold, held=plan.held)
    rows = fleet + [machine(100 + o["offer_id"], o["est_proofs_per_hour"]) for o in joint]
    assert plan_fleet(rows, 300, spare=True).gap <= 0
    # The 25 and the 5.1 (310.1, holding 310) are cheaper than the 20 and the 5.1.
    assert sorted(o["offer_id"] for o in joint) == [1, 3]


def test_a_release_keeps_the_cheapest_fleet_that_holds_its_own_level() -> None:
    """Target 300, fifteen machines (453 proofs/h). With every machine held
    the level is 309 (0.95 × 300 + a 24), and the cheapest subset holding 309
    costs $2.43/h. A subset with no 24 (or 20) to spare needs only its own
    level, 300: the 45s, 30s and 10s that hold it cost $2.38/h."""
    sizes = [
        (24.0, 0.29), (20.0, 0.25), (10.0, 0.23), (24.0, 0.30), (30.0, 0.27),
        (30.0, 0.25), (45.0, 0.28), (45.0, 0.21), (45.0, 0.20), (30.0, 0.29),
        (10.0, 0.20), (10.0, 0.19), (10.0, 0.26), (30.0, 0.25), (30.0, 0.24),
    ]  # fmt: skip
    rows = [machine(i, rate, dph=dph) for i, (rate, dph) in enumerate(sizes, 1)]
    plan = plan_fleet(rows, 300, spare=True)
    assert plan.hold == pytest.approx(309)
    gone = {iid for iid, _ in plan.destroy}
    kept = [r for r in rows if r["id"] not in gone]
    assert sum(r["dph"] for r in kept) == pytest.approx(2.38)
    rates = [r["expected_proofs_per_hour"] for r in kept]
    assert hold_level(300, rates) == 300 and sum(rates) >= 300
    after = plan_fleet(kept, 300, spare=True)
    assert after.gap <= 1e-9 and after.destroy == []


def test_seed_5s_drop_to_300_keeps_a_fleet_inside_the_band() -> None:
    """The market day's seed 5 (2026-12-01) at the drop from 800 to 300:
    seventeen machines. Kept as the cheapest subset holding the whole fleet's
    level (310.4), eight machines of 315.3 proofs/h ($2.80/h) stayed at the
    band's top, and over it in truth, for eight hours. The cheapest subset
    holding its own level, planned TOP_MARGIN under the top: four large
    machines, 303.2 ($2.77/h), which need no spare (none is small enough)."""
    sizes = [
        (88.445, 0.697), (182.917, 1.932), (62.578, 0.72), (25.406, 0.207),
        (23.792, 0.241), (25.111, 0.243), (24.85, 0.251), (24.818, 0.268),
        (23.413, 0.24), (24.246, 0.274), (80.63, 0.72), (24.004, 0.228),
        (24.529, 0.228), (25.208, 0.229), (38.119, 0.312), (96.053, 1.039),
        (39.411, 0.538),
    ]  # fmt: skip
    rows = [machine(i, rate, dph=dph) for i, (rate, dph) in enumerate(sizes, 1)]
    plan = plan_fleet(rows, 300, spare=True)
    gone = {iid for iid, _ in plan.destroy}
    kept = [r for r in rows if r["id"] not in gone]
    rates = [r["expected_proofs_per_hour"] for r in kept]
    assert 300 <= plan.expected_after <= (1 + BAND - TOP_MARGIN) * 300
    assert sum(rates) >= hold_level(300, rates)
    assert sum(r["dph"] for r in kept) == pytest.approx(2.768)
    assert plan_fleet(kept, 300, spare=True).destroy == []
