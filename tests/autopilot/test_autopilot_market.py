"""The autopilot's Snark Market rules (fleet_agent/autopilot/market.py), read
from the run's context as the model reads it: the ask price follows the
market within the operator's range, requests go on for a fleet and off
before it goes, and no rental is sought beyond the slots."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from fleet_agent.autopilot.market import (
    PRICE_SLACK,
    PRICE_STEP,
    PRICE_UNDER,
    MarketView,
    market_calls,
    market_view,
)
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.autopilot.run_view import Run
from fleet_agent.llm.tools import (
    FLEET_TOOLS,
    LOCAL_TOOLS,
    MARKET_TOOLS,
    offered_tools,
    tool_schemas,
)
from fleet_agent.market.point import ChallengeLedger, MarketPoint, MarketPolicy, data_line

AT = datetime(2026, 12, 7, 12, tzinfo=UTC)
POLICY = MarketPolicy(min_price_nfil=1_000_000, max_price_nfil=20_000_000)


def _point(**over: Any) -> MarketPoint:
    fields: dict[str, Any] = {
        "at": AT,
        "enabled": True,
        "price_nfil": 5_000_000,
        "market_price_nfil": 5_000_000,
        "asks_open": 2,
        "rows_open": 2,
        "queued": 0,
        "gpus": 4,
        "gpus_proving": 4,
        "slots_total": 10,
        "slots_used": 4,
        "ledger": ChallengeLedger(based_on=500, challenges=500),
    }
    fields.update(over)
    return MarketPoint(**fields)


def _view(policy: MarketPolicy = POLICY, **over: Any) -> MarketView:
    run = Run([{"role": "user", "content": f"[run #1]\n{data_line(_point(**over), policy)}"}])
    view = market_view(run)
    assert view is not None
    return view


def _names(calls: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], {k: v for k, v in c["input"].items() if k != "reason"}) for c in calls]


def test_the_data_line_round_trips_through_the_run_view() -> None:
    view = _view(withdrawals_last_hour=3)
    assert view.price_nfil == 5_000_000 and view.gpus == 4 and view.slots_total == 10
    assert view.withdrawals_left == POLICY.max_withdrawals_per_hour - 3
    assert view.min_price_nfil == 1_000_000 and view.max_price_nfil == 20_000_000
    line = data_line(_point(), POLICY)
    assert line.startswith("Market data: {") and "\n" not in line
    assert json.loads(line.removeprefix("Market data: "))["loss"] is False


def test_no_line_or_a_broken_line_is_no_view() -> None:
    assert market_view(Run([{"role": "user", "content": "[run #1]\n## Target"}])) is None
    broken = '[run #1]\nMarket data: {"enabled": true}'
    assert market_view(Run([{"role": "user", "content": broken}])) is None


def _under(market: int) -> int:
    return round(market * (1 - PRICE_UNDER))


def test_an_ask_over_the_market_comes_just_under_it_and_reprices_while_gpus_idle() -> None:
    view = _view(market_price_nfil=3_000_000, rows_open=1, asks_open=2)
    assert _names(market_calls(view, 100)) == [
        ("set_ask_price", {"price_nfil": _under(3_000_000), "reprice_open": True})
    ]
    busy = _view(market_price_nfil=3_000_000, rows_open=4, asks_open=2)
    assert _names(market_calls(busy, 100)) == [
        ("set_ask_price", {"price_nfil": _under(3_000_000), "reprice_open": False})
    ]


def test_no_withdrawals_left_lowers_the_price_for_new_asks_only() -> None:
    view = _view(market_price_nfil=3_000_000, rows_open=1, asks_open=2, withdrawals_last_hour=4)
    assert _names(market_calls(view, 100)) == [
        ("set_ask_price", {"price_nfil": _under(3_000_000), "reprice_open": False})
    ]


def test_busy_gpus_step_the_price_up_never_past_just_under_the_market() -> None:
    step = _view(market_price_nfil=8_000_000, rows_open=4, queued=2)
    up = round(5_000_000 * (1 + PRICE_STEP))
    assert _names(market_calls(step, 100)) == [
        ("set_ask_price", {"price_nfil": up, "reprice_open": False})
    ]
    close = _view(market_price_nfil=5_300_000, rows_open=4, queued=2)
    assert _names(market_calls(close, 100)) == [
        ("set_ask_price", {"price_nfil": _under(5_300_000), "reprice_open": False})
    ]
    at_it = _view(market_price_nfil=5_000_000, price_nfil=_under(5_000_000), rows_open=4, queued=2)
    assert market_calls(at_it, 100) == []


def test_idle_gpus_step_the_price_down_whatever_the_market() -> None:
    # Following the market from under it spirals onto it: the rule reads our GPUs.
    idle = _view(market_price_nfil=8_000_000, rows_open=1, asks_open=3)
    down = round(5_000_000 * (1 - PRICE_STEP))
    assert _names(market_calls(idle, 100)) == [
        ("set_ask_price", {"price_nfil": down, "reprice_open": True})
    ]
    floor = _view(market_price_nfil=8_000_000, price_nfil=POLICY.min_price_nfil, rows_open=1)
    assert market_calls(floor, 100) == []
    nothing_waits = _view(market_price_nfil=8_000_000, rows_open=4, queued=0)
    assert market_calls(nothing_waits, 100) == []


def test_the_price_stays_in_the_operators_range() -> None:
    low = _view(market_price_nfil=100, rows_open=0)
    assert _names(market_calls(low, 100))[0][1]["price_nfil"] == POLICY.min_price_nfil
    high = _view(market_price_nfil=90_000_000, price_nfil=30_000_000, rows_open=1)
    assert _names(market_calls(high, 100))[0][1]["price_nfil"] == POLICY.max_price_nfil
    barely = _view(price_nfil=POLICY.min_price_nfil + 10, market_price_nfil=8_000_000, rows_open=1)
    assert _names(market_calls(barely, 100))[0][1]["price_nfil"] == POLICY.min_price_nfil


def test_small_moves_and_no_range_leave_the_price() -> None:
    near = int(5_000_000 * (1 + PRICE_SLACK / 2))
    assert market_calls(_view(market_price_nfil=near, rows_open=4), 100) == []
    unranged = MarketPolicy()  # max 0: the agent may not set prices
    assert market_calls(_view(unranged, market_price_nfil=1_000_000, rows_open=0), 100) == []
    assert market_calls(_view(market_price_nfil=None, rows_open=0), 100) == []


def test_requests_go_off_before_the_fleet_goes_and_on_for_a_fleet() -> None:
    assert _names(market_calls(_view(), 0)) == [("set_requests", {"enabled": False})]
    assert _names(market_calls(_view(enabled=False), 100)) == [("set_requests", {"enabled": True})]
    lost = _view(enabled=False, loss_since=AT)
    assert market_calls(lost, 100) == []  # a loss stands: the operator's setting decides
    assert market_calls(_view(enabled=False, gpus_proving=0), 100) == []  # none proves yet


def test_requests_go_on_with_the_ask_under_the_market_in_the_same_run() -> None:
    # An ask over the market's price takes no work until the next run.
    over = _view(enabled=False, market_price_nfil=3_400_000, rows_open=0, asks_open=0)
    assert _names(market_calls(over, 100)) == [
        ("set_ask_price", {"price_nfil": _under(3_400_000), "reprice_open": False}),
        ("set_requests", {"enabled": True}),
    ]
    # Under the market it is left: no ask of ours to judge idle GPUs by yet.
    under = _view(enabled=False, market_price_nfil=8_000_000, rows_open=0, asks_open=2)
    assert _names(market_calls(under, 100)) == [("set_requests", {"enabled": True})]


@pytest.mark.parametrize(("gpus", "slots", "full"), [(4, 10, False), (10, 10, True), (1, 0, True)])
def test_slots_bound_the_fleet(gpus: int, slots: int, full: bool) -> None:
    assert _view(gpus=gpus, slots_total=slots).slots_full is full


def test_market_tools_are_offered_only_in_market_mode() -> None:
    every = LOCAL_TOOLS | FLEET_TOOLS
    assert every >= MARKET_TOOLS
    assert offered_tools(every, market=True) == every
    assert not offered_tools(every, market=False) & MARKET_TOOLS
    names = {t["name"] for t in tool_schemas(offered_tools(every, market=True))}
    assert names >= MARKET_TOOLS


async def test_the_autopilot_pulls_the_levers_at_a_runs_first_round() -> None:
    context = "[run #3]\n## Target\n100 proofs/hour\n" + data_line(
        _point(enabled=False, market_price_nfil=3_000_000, rows_open=0), POLICY
    )
    tools = [{"name": n} for n in sorted(MARKET_TOOLS | {"schedule_next_check"})]
    reply = await AutopilotProvider().complete(
        system="", messages=[{"role": "user", "content": context}], tools=tools, max_tokens=100
    )
    assert [
        (b["name"], b["input"]["enabled"]) for b in reply.content if b.get("name") == "set_requests"
    ] == [("set_requests", True)]
    # Without the market's tools offered, nothing of the market is done.
    reply = await AutopilotProvider().complete(
        system="", messages=[{"role": "user", "content": context}], tools=[], max_tokens=100
    )
    assert all(b["type"] == "text" for b in reply.content)
