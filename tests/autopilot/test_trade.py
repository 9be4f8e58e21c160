"""A trade: a much cheaper machine of a dear one's size, so that the dear one
can go once it proves (fleet_agent/autopilot/trade.py, policy.py, the autopilot)."""

from __future__ import annotations

import json
from typing import Any

from fleet_agent.autopilot.policy import plan_fleet
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.autopilot.swap import Held
from fleet_agent.autopilot.trade import released_once_proving, trade_offers
from fleet_agent.llm.prompt import system_prompt
from fleet_agent.policy.checks import TRADE_CHECK_REASON, TRADE_CHECK_SECONDS
from tests.helpers.policy_rows import (
    FLEET_TOOLS,
    context_of,
    machine,
    offer,
    reply_to_search,
    tool_results,
    trade_check,
)

TOOLS = FLEET_TOOLS

# Seed 1's market day after hour 18 (target 500), in short: a fleet inside
# the band with a 28-proof machine at $0.32/h ($11.4 per 1,000 proofs).
FLEET = [
    machine(1, 206.6, 1.687),
    machine(2, 120.0, 1.0),
    machine(3, 101.0, 0.85),
    machine(4, 28.1, 0.320),
    machine(5, 25.0, 0.21),
    machine(6, 24.0, 0.20),
]  # 504.7; with the spare off the level is the target, 500; the planned top 520


def _ids(picks: list[dict[str, Any]]) -> list[int]:
    return [int(o["offer_id"]) for o in picks]


def _held(rows: list[dict[str, Any]]) -> tuple[Held, ...]:
    plan = plan_fleet(rows, 500)
    assert plan.destroy == [] and plan.swap == ()
    return plan.trade


def test_a_dear_machine_is_traded_for_a_much_cheaper_one_of_its_size() -> None:
    held = _held(FLEET)
    assert len(held) == 6
    offers = [
        offer(10, 27.0, 0.26),  # 19 % cheaper than the 28's $0.32: too little
        offer(11, 28.0, 0.20),  # 37 % cheaper: the trade
        offer(12, 26.0, 0.22),  # 31 % cheaper, saves less
    ]
    assert _ids(trade_offers(offers, held, 500, spare=False)) == [11]
    assert trade_offers(offers[:1], held, 500, spare=False) == []


def test_a_trade_keeps_the_fleets_shape_and_level() -> None:
    held = _held(FLEET)
    # Much cheaper, but larger than the 28 and than the 42.5 the spare
    # covers at 500: the fleet would have one more machine no spare covers.
    assert trade_offers([offer(20, 60.0, 0.20)], held, 500, spare=False) == []
    # 4.7 over the target: an offer of 23 for the 28 counts 20.7 (90 % of its
    # estimate), and the fleet would be short of the target without it.
    assert trade_offers([offer(21, 23.0, 0.16)], held, 500, spare=False) == []
    # Past the planned top (4 % over, 520) with the offer instead of the 28.
    over = [*FLEET[:5], machine(6, 38.0, 0.20)]  # 518.7
    assert trade_offers([offer(22, 40.0, 0.20)], _held(over), 500, spare=False) == []
    # With the spare on, an offer that would raise the level it holds is no trade.
    # 522.7, the level 475 + 42 = 517 (the spare covers the 42).
    rates = ((206.6, 1.687), (120.0, 1.0), (101.0, 0.85), (28.1, 0.32), (25.0, 0.21), (42.0, 0.4))
    held = tuple(Held(rate=r, dph=d, releasable=True, settled=True) for r, d in rates)
    assert trade_offers([offer(23, 42.5, 0.20)], held, 500, spare=True) == []
    assert _ids(trade_offers([offer(24, 39.0, 0.20)], held, 500, spare=True)) == [24]


def test_no_trade_unless_the_fleet_is_settled_inside_the_band() -> None:
    loading = [*FLEET, {**machine(7, 24.0, 0.2), "state": "loading", "proofs_per_hour": 0.0}]
    loading[-1].update(measured_proofs_per_hour=None, age_minutes=10.0, releasable=False)
    assert plan_fleet(loading, 500).trade == ()
    unmeasured = [*FLEET[:5], {**FLEET[5], "measured_proofs_per_hour": None}]
    assert plan_fleet(unmeasured, 500).trade == ()
    short = FLEET[1:]  # 298: a gap, not a trade
    assert plan_fleet(short, 500).trade == ()
    young = [*FLEET[:3], {**FLEET[3], "releasable": False}, *FLEET[4:]]
    held = _held(young)
    assert trade_offers([offer(11, 28.0, 0.20)], held, 500, spare=False) == []


def test_the_machine_traded_goes_once_the_new_one_proves() -> None:
    new = {**machine(7, 28.0, 0.20), "age_minutes": 40.0, "releasable": False}
    loading = {**new, "state": "loading", "proofs_per_hour": 0.0, "age_minutes": 10.0}
    loading["measured_proofs_per_hour"] = None
    assert plan_fleet([*FLEET, loading], 500).destroy == []
    assert plan_fleet([*FLEET, new], 500).destroy == [(4, "not needed for the target")]


# Seed 4's market day at hour 1.2 (target 500, the spare on): 518.6 proofs/h,
# the level 475 + 37.7 = 512.7 (the spare covers the 37.7).
SEED4 = [
    machine(1, 59.6, 0.4349),
    machine(2, 51.3, 0.4466),
    machine(3, 56.6, 0.5785),
    machine(4, 101.4, 0.9895),
    machine(5, 47.7, 0.5157),
    machine(6, 24.3, 0.2155),
    machine(7, 25.8, 0.2197),
    machine(8, 27.6, 0.312),  # $1.13 per 100 proofs
    machine(9, 23.8, 0.268),
    machine(10, 28.4, 0.3351),  # $1.18 per 100 proofs: the rule releases it first
    machine(11, 34.4, 0.4371),
    machine(12, 37.7, 0.3661),
]


def test_a_trade_is_judged_by_the_machine_the_release_rule_lets_go() -> None:
    """An offer is a trade when the release rule, with the offer proving and
    unmeasured, lets one dear machine go: the 24.8 lets the 27.6 ($1.13 per
    100 proofs) go, the 26 lets the 28.4 ($1.18) go, and each goes the
    moment the offer proves, not at its first measurement."""
    plan = plan_fleet(SEED4, 500, spare=True)
    assert plan.destroy == [] and len(plan.trade) == 12
    assert released_once_proving(plan.trade, 24.8, 0.2146, 500, spare=True) == [7]
    assert released_once_proving(plan.trade, 26.0, 0.22, 500, spare=True) == [9]
    tight, fits = offer(30, 24.8, 0.2146), offer(31, 26.0, 0.22)
    assert _ids(trade_offers([tight], plan.trade, 500, spare=True)) == [30]
    assert _ids(trade_offers([tight, fits], plan.trade, 500, spare=True)) == [31]  # saves more
    for new, gone in ((tight, 8), (fits, 10)):
        row = machine(13, new["est_proofs_per_hour"], new["dph"], measured_proofs_per_hour=None)
        after = plan_fleet([*SEED4, {**row, "releasable": False}], 500, spare=True)
        assert after.destroy == [(gone, "not needed for the target")]


def test_an_offer_that_would_let_two_machines_go_is_no_trade() -> None:
    """One offer for one machine: a 40 that makes two 20s unneeded would
    leave the fleet with fewer, larger machines."""
    fleet = [machine(1, 206.6, 1.687), machine(2, 120.0, 1.0), machine(3, 101.0, 0.85)]
    fleet += [machine(4 + k, 20.0, 0.3) for k in range(4)]  # 507.6
    held = _held(fleet)
    assert len(released_once_proving(held, 40.0, 0.2, 500, spare=False)) == 2
    assert trade_offers([offer(40, 40.0, 0.2)], held, 500, spare=False) == []


async def _reply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reply = await AutopilotProvider().complete(
        system="s", messages=messages, tools=TOOLS, max_tokens=100
    )
    return reply.content


async def test_the_autopilot_looks_for_a_trade_every_half_hour_through_its_own_protocol() -> None:
    """A settled fleet: one search, a create with the trade's reason and a
    check in 30 min; no search while that check is pending."""
    context = context_of(FLEET, 500)
    (search,) = await _reply([{"role": "user", "content": context}])
    assert search["name"] == "search_offers"
    offers = [offer(11, 28.0, 0.20)]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": context},
        {"role": "assistant", "content": [search]},
        tool_results(search["id"], "1 offer.\n" + json.dumps(offers)),
    ]
    create, check = await _reply(messages)
    assert create["name"] == "create_instance" and create["input"]["offer_id"] == 11
    assert create["input"]["reason"].startswith("a trade")
    assert check["name"] == "schedule_next_check"
    assert check["input"] == {"delay_seconds": TRADE_CHECK_SECONDS, "reason": TRADE_CHECK_REASON}
    # No offer fits: the check is scheduled all the same, then the run ends.
    messages[-1] = tool_results(search["id"], "1 offer.\n" + json.dumps([offer(10, 27, 0.26)]))
    (check,) = await _reply(messages)
    assert check["name"] == "schedule_next_check"
    messages += [
        {"role": "assistant", "content": [check]},
        tool_results(check["id"], "Wake scheduled."),
    ]
    assert [b["type"] for b in await _reply(messages)] == ["text"]
    # While the check is pending, a run of the same fleet does not search;
    # a pending wake of another reason does not count.
    pending = trade_check()
    waiting = context_of(FLEET, 500, wakes=[pending])
    assert [b["type"] for b in await _reply([{"role": "user", "content": waiting}])] == ["text"]
    other = pending.model_copy(update={"reason": "an instance still loading in 15 min"})
    again = context_of(FLEET, 500, wakes=[other])
    (search,) = await _reply([{"role": "user", "content": again}])
    assert search["name"] == "search_offers"


async def test_without_schedule_next_check_the_autopilot_still_trades() -> None:
    tools = [t for t in TOOLS if t["name"] != "schedule_next_check"]
    result = "1 offer.\n" + json.dumps([offer(11, 28.0, 0.20)])
    reply = await reply_to_search(context_of(FLEET, 500), result, tools)
    assert [b.get("name") for b in reply] == ["create_instance"]


def test_the_model_is_told_about_trades() -> None:
    prompt = system_prompt("a")
    assert "look for a trade" in prompt and "25 % cheaper per hour" in prompt
