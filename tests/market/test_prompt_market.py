"""The model's view of market mode: a `## Market` section beside `## Demand`
(the latest reading and its age, the levers, the rules), read from the
store by `load_context`; with the market off the message's bytes are those
of before market mode."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from temporalio.testing import ActivityEnvironment

from activities.runlog import RunLogActivities
from fleet_agent.llm.prompt import context_message, system_prompt
from fleet_agent.llm.prompt_market import market_section
from fleet_agent.llm.transcript import CONTEXT_SEQ
from fleet_agent.market.point import MarketPoint, data_line
from fleet_agent.models import AgentConfig, LoadContextRequest, RunInput
from fleet_agent.store import MarketHistory, Store
from tests.helpers.market_points import SNARK, market_point
from tests.helpers.store_backends import store_on_both_backends

__all__ = ["store_on_both_backends"]  # the `store` fixture, on both backends

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
POINT = market_point(NOW - timedelta(minutes=5))


def _message(config: AgentConfig, market: MarketPoint | None = None, **kw: object) -> str:
    args: dict[str, object] = {
        "run": 7,
        "session": 2,
        "now": NOW,
        "trigger_block": "Trigger: heartbeat (nothing else happened).",
        "fleet_text": "No instances.",
        "config": config,
        "wakes": [],
        "next_heartbeat_at": None,
        **kw,
    }
    if market is not None:
        args["market"] = market
    return context_message(**args)  # type: ignore[arg-type]


def _section(text: str) -> str:
    return text.split("## Market\n", 1)[1].split("\n\n## Limits", 1)[0]


def test_market_mode_shows_the_reading_the_levers_and_the_rules() -> None:
    text = _message(SNARK, POINT)
    assert text.index("## Target") < text.index("## Market") < text.index("## Limits")
    assert _section(text).splitlines() == [
        "The fleet proves for the operator's Curio node, which sells proofs on the Snark "
        "Market; the monitor reads its business every poll.",
        f"- latest reading (as of 11:55, 5 min ago): {POINT.line()}",
        "- GPUs rented: 6 of 10 slots",
        "- note: profit $+2.00/h: hold",
        data_line(POINT, SNARK.market_policy()),
        "- levers: set_ask_price(price_nfil, reprice_open, reason): the ask price in whole "
        "nFIL within [1000000, 9000000]; reprice_open also withdraws the open asks so new "
        "ones take it; set_requests(enabled, withdraw_open, reason): the node asks the "
        "market for work or stops; withdraw_open also withdraws the open asks (at most 3 "
        "withdrawals an hour)",
        "Rules: a request pays the market's price when it came and goes to the cheapest ask "
        "at or under it, so the ask sets your place in the line, not your pay: never over "
        "the market's price (it takes nothing); lower it while GPUs idle and asks wait, "
        "raise it while every GPU is busy and work waits (your cheap asks may be what sets "
        "the market's price); "
        "never rent GPUs beyond the slots; before shrinking the fleet below what the "
        "open rows need, turn requests off and let the queue drain; a withdrawal costs 1 "
        "challenge proof, a late proof 50.",
    ]


def test_a_loss_a_fixed_price_and_no_reading_are_said() -> None:
    config = SNARK.model_copy(update={"market_max_price_nfil": 0, "market_on_loss": "stop"})
    loss = POINT.model_copy(
        update={"loss_since": NOW - timedelta(minutes=40), "note": "loss:\nstop soon"}
    )
    section = market_section(config, loss, NOW)
    loss_line = (
        "- at a loss since 11:20 (revenue per proof under cost per proof; after 60 min: stop)"
    )
    assert loss_line in section
    assert "- note: loss: stop soon" in section, "the note stays on one line"
    assert "set_ask_price(price_nfil, reprice_open, reason): not yours to pull" in section
    alone = market_section(config, None, NOW)
    assert "- latest reading: none yet" in alone and "GPUs rented" not in alone
    assert "never rent GPUs beyond the slots" in alone


def test_with_the_market_off_the_message_is_as_it_was() -> None:
    off = SNARK.model_copy(update={"market_mode": "off"})
    text = _message(off, POINT)
    assert text == _message(off)
    assert "Market" not in text and "market" not in text and "slots" not in text
    assert " proofs/hour\n\n## Limits\n" in text, "the target is followed by the limits"
    # Beside demand mode's section, after it; neither touches the cached prefix.
    both = SNARK.model_copy(update={"target_mode": "demand", "max_target": 900})
    shown = _message(both, POINT)
    assert shown.index("## Demand") < shown.index("## Market") < shown.index("## Limits")
    assert "Snark" not in system_prompt("a")


async def test_load_context_reads_the_latest_point_in_market_mode_only(store: Store) -> None:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, started_time=NOW)
    history = MarketHistory(store)
    history.record("a", POINT.model_copy(update={"at": NOW - timedelta(minutes=30)}))
    history.record("a", POINT)
    runlog = RunLogActivities(store)
    off = SNARK.model_copy(update={"market_mode": "off"})
    for run, config in ((1, SNARK), (2, off)):
        inp = RunInput(agent_id="a", run=run, session=1, triggers=[], config=config)
        await env.run(runlog.load_context, LoadContextRequest(run_input=inp, started_at=NOW))
    shown = store.messages.get_message("a", 1, CONTEXT_SEQ)
    assert shown is not None
    assert f"- latest reading (as of 11:55, 5 min ago): {POINT.line()}" in shown.content
    fixed = store.messages.get_message("a", 2, CONTEXT_SEQ)
    assert fixed is not None and "## Market" not in fixed.content
