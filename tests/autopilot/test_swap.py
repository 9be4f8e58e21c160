"""A swap: one smaller rental so that a settled fleet past the band can
release a machine (fleet_agent/autopilot/swap.py, policy.py, the autopilot)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from fleet_agent.autopilot.policy import plan_fleet
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.autopilot.swap import Held, swap_offers, wants_swap
from fleet_agent.llm.prompt import system_prompt
from fleet_agent.models import Wake
from fleet_agent.policy.checks import SWAP_CHECK_REASON, SWAP_CHECK_SECONDS, TRADE_CHECK_REASON
from tests.helpers.policy_rows import (
    FLEET_TOOLS,
    context_of,
    machine,
    offer,
    reply_to_search,
    tool_results,
)

TOOLS = [{"name": n} for n in ("search_offers", "create_instance", "destroy_instance")]

# Seed 4's market day after the decrease to 300: 317.1 proofs/h, 0.7 % past
# the band's top, and no subset inside it (266 without the 51).
SEED_4 = [machine(1, 206.2, 1.458), machine(2, 59.6, 0.435), machine(3, 51.3, 0.447)]
OFFERS = [
    offer(10, 40.0, 0.30),  # 206 + 60 + 40 = 306: inside
    offer(11, 24.0, 0.20),  # too small for any subset to reach 300
    offer(12, 99.0, 0.80),  # 206 + 99 = 305, dearer than 10 with the 60
    offer(13, 45.0, 0.50),  # inside too, dearer than 10
]


def _ids(picks: list[dict[str, Any]]) -> list[int]:
    return [int(o["offer_id"]) for o in picks]


def _young(iid: int, rate: float, dph: float, *, proving: bool) -> dict[str, Any]:
    row = {**machine(iid, rate, dph), "age_minutes": 30.0, "releasable": False}
    if not proving:
        row.update(state="loading", proofs_per_hour=0.0, measured_proofs_per_hour=None)
    return row


def test_a_fleet_past_the_band_no_release_brings_back_rents_one_smaller_machine() -> None:
    for spare in (False, True):
        plan = plan_fleet(SEED_4, 300, spare=spare)
        assert plan.destroy == [] and plan.gap <= 0 and len(plan.swap) == 3
        assert _ids(swap_offers(OFFERS, plan.swap, 300, plan.hold)) == [10]


def test_the_machine_the_swap_replaces_goes_once_the_new_one_proves_and_not_before() -> None:
    loading = plan_fleet([*SEED_4, _young(4, 40.0, 0.30, proving=False)], 300)
    assert loading.destroy == [] and loading.swap == ()  # no second swap while it loads
    proving = plan_fleet([*SEED_4, _young(4, 38.5, 0.30, proving=True)], 300)
    assert proving.destroy == [(3, "not needed for the target")]
    assert proving.expected_after == 206.2 + 59.6 + 38.5


def test_no_swap_while_the_fleet_is_not_settled_or_is_inside_the_band() -> None:
    unmeasured = [*SEED_4[:2], {**SEED_4[2], "measured_proofs_per_hour": None}]
    assert plan_fleet(unmeasured, 300).swap == ()
    assert plan_fleet([*SEED_4[:2], machine(3, 40.0, 0.3)], 300).swap == ()  # 305.8: inside
    bridged = [*SEED_4, {**machine(5, 20.0, 0.2), "temporary": True, "releasable": False}]
    assert plan_fleet(bridged, 300).swap == ()  # a bridge: something else is under way
    dead = [*SEED_4, {**machine(6, 30.0), "state": "exited"}]
    assert plan_fleet(dead, 300).swap == ()


def test_no_swap_when_nothing_lands_inside_or_it_costs_too_much_more() -> None:
    plan = plan_fleet(SEED_4, 300)
    assert swap_offers([offer(11, 24.0, 0.20)], plan.swap, 300, plan.hold) == []
    # 40 proofs/h at $1.00: the fleet 206 + 60 + 40 at $2.89/h, 24 % dearer
    # than the $2.34/h it is now, is taken; at $1.20 (33 % dearer) it is not.
    assert _ids(swap_offers([offer(10, 40.0, 1.00)], plan.swap, 300, plan.hold)) == [10]
    assert swap_offers([offer(10, 40.0, 1.20)], plan.swap, 300, plan.hold) == []


def test_machines_not_releasable_yet_stay_in_the_swapped_fleet() -> None:
    held = [
        Held(rate=206.2, dph=1.458, releasable=True, settled=True),
        Held(rate=59.6, dph=0.435, releasable=False, settled=True),
        Held(rate=51.3, dph=0.447, releasable=False, settled=True),
    ]
    assert wants_swap(held, 300)
    # Only the 206 may go: 60 + 51 + 99 = 210 is far under; 60 + 51 + offers
    # of 206 would be needed, and none is shown.
    assert swap_offers(OFFERS, held, 300, 300) == []
    big = offer(14, 190.0, 1.3)  # 60 + 51 + 190 = 300.9: inside, cheaper than the 206
    assert _ids(swap_offers([*OFFERS, big], held, 300, 300)) == [14]


def test_a_spare_level_is_held_by_the_swap_when_it_costs_little_more() -> None:
    held = [Held(rate=r, dph=0.25, releasable=True, settled=True) for r in (100.0,) * 3]
    held.append(Held(rate=24.0, dph=0.24, releasable=True, settled=True))  # 324 at 300
    # The level with a spare for the 24: 285 + 24 = 309. A 9.5-proof offer
    # holds it (300 + 9.5 for $0.83/h), a 3-proof one the target alone
    # ($0.80/h): 3.75 % more for the spare is taken, 6.25 % is not.
    small = [offer(20, 9.5, 0.08), offer(21, 3.0, 0.05)]
    assert _ids(swap_offers(small, held, 300, 309)) == [20]
    assert _ids(swap_offers(small, held, 300, 300)) == [21]
    dearer = [offer(20, 9.5, 0.10), offer(21, 3.0, 0.05)]
    assert _ids(swap_offers(dearer, held, 300, 309)) == [21]


async def test_the_autopilot_swaps_through_its_own_protocol() -> None:
    """A settled fleet past the band: a search, one create with the swap's
    reason, and no destroy in the same run (make before break)."""
    context = context_of(SEED_4, 300)
    found = f"Found {len(OFFERS)} offers.\n" + json.dumps(OFFERS)
    (create,) = await reply_to_search(context, found, TOOLS)
    assert create["name"] == "create_instance" and create["input"]["offer_id"] == 10
    assert create["input"]["reason"].startswith("a swap")
    # Nothing fits: the run ends with a text and no rental.
    none = "Found 1 offer.\n" + json.dumps([OFFERS[1]])
    assert [b["type"] for b in await reply_to_search(context, none, TOOLS)] == ["text"]


async def test_a_swap_search_that_finds_none_is_looked_at_again_on_a_check() -> None:
    """With schedule_next_check offered: a check in SWAP_CHECK_SECONDS after
    a search that found no swap, and no swap search while it is pending."""
    context = context_of(SEED_4, 300)
    (search,) = await _reply([{"role": "user", "content": context}])
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": context},
        {"role": "assistant", "content": [search]},
        tool_results(search["id"], "Found 1 offer.\n" + json.dumps([OFFERS[1]])),
    ]
    (check,) = await _reply(messages)
    assert check["name"] == "schedule_next_check"
    assert check["input"] == {"delay_seconds": SWAP_CHECK_SECONDS, "reason": SWAP_CHECK_REASON}
    messages += [
        {"role": "assistant", "content": [check]},
        tool_results(check["id"], "Wake scheduled."),
    ]
    assert [b["type"] for b in await _reply(messages)] == ["text"]
    # A swap found: rented, with no check.
    messages = [*messages[:2], tool_results(search["id"], "2 offers.\n" + json.dumps(OFFERS))]
    (create,) = await _reply(messages)
    assert create["name"] == "create_instance" and create["input"]["reason"].startswith("a swap")
    # While the check is pending the same fleet does not search; a wake of
    # another reason does not count.
    pending = Wake(
        id="w6-1",
        due_at=datetime(2026, 12, 2, 0, 10, tzinfo=UTC),
        reason=SWAP_CHECK_REASON,
        requested_by_run=6,
    )
    waiting = context_of(SEED_4, 300, wakes=[pending])
    assert [b["type"] for b in await _reply([{"role": "user", "content": waiting}])] == ["text"]
    other = pending.model_copy(update={"reason": TRADE_CHECK_REASON})
    (again,) = await _reply([{"role": "user", "content": context_of(SEED_4, 300, wakes=[other])}])
    assert again["name"] == "search_offers"


async def _reply(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reply = await AutopilotProvider().complete(
        system="s", messages=messages, tools=FLEET_TOOLS, max_tokens=100
    )
    return reply.content


def test_the_model_is_told_about_swaps() -> None:
    prompt = system_prompt("a")
    assert "rent one smaller machine" in prompt
    assert f'with the reason "{SWAP_CHECK_REASON}"' in prompt
