"""A fast cover where no bridge fits (fleet_agent/autopilot/fast_cover.py): the
pure rule, and the autopilot renting so after a failure at a small target."""

from __future__ import annotations

import json
from typing import Any

from fleet_agent.autopilot.bridges import fast
from fleet_agent.autopilot.fast_cover import faster_cover, under_meanwhile
from fleet_agent.autopilot.policy import choose_offers
from fleet_agent.llm.prompt import system_prompt
from fleet_agent.policy.premiums import FAST_COVER_PREMIUM
from tests.helpers.policy_rows import context_of, machine, offer, reply_to_search

TOOLS = [{"name": n} for n in ("search_offers", "create_instance", "destroy_instance")]


def _offer(offer_id: int, rate: float, dph: float, load: float | None) -> dict[str, Any]:
    return {**offer(offer_id, rate, dph), "est_load_minutes": load}


def _choose(gap: float, target: float) -> Any:
    return lambda pool: choose_offers(pool, gap, target)


def test_a_fast_cover_is_taken_for_a_small_share_of_the_fleets_cost() -> None:
    slow, quick = _offer(1, 24.8, 0.21, 29), _offer(2, 24.8, 0.25, 13)
    offers = [slow, quick, _offer(3, 24.8, 0.40, 8)]
    picks = choose_offers(offers, 24, 300)
    assert picks == [slow]
    # $0.04/h more on a fleet of $2.5/h: 1.6 %, under the premium.
    assert FAST_COVER_PREMIUM > 0.04 / 2.5
    assert faster_cover(offers, picks, _choose(24, 300), held_dph=2.29, room=40) == [quick]
    # On a fleet of $1/h the same $0.04 is 4 %: the cheapest stays.
    assert faster_cover(offers, picks, _choose(24, 300), held_dph=0.79, room=40) is None
    # A cover that is fast already, or no fast offer: nothing to do.
    assert faster_cover(offers, [quick], _choose(24, 300), held_dph=2.29, room=40) is None
    assert faster_cover([slow], [slow], _choose(24, 300), held_dph=2.29, room=40) is None


def test_a_fast_cover_does_not_take_the_fleet_further_past_the_band() -> None:
    """The only fast offer is larger than the gap and than the room under
    the band's planned top: the cheapest cover stays."""
    slow, big = _offer(1, 24.8, 0.21, 29), _offer(2, 60.0, 0.22, 10)
    picks = choose_offers([slow], 24, 300)
    assert faster_cover([slow, big], picks, _choose(24, 300), held_dph=2.29, room=40) is None
    assert faster_cover([slow, big], picks, _choose(24, 300), held_dph=2.29, room=60) == [big]


def test_fast_and_under_read_the_rows() -> None:
    assert fast({"est_load_minutes": 15}) and not fast({"est_load_minutes": 15.5})
    assert not fast({"est_load_minutes": None}) and not fast({})
    assert under_meanwhile(284.9, 300) and not under_meanwhile(285.0, 300)
    assert not under_meanwhile(0.0, 0.0)


async def test_the_autopilot_replaces_a_large_failure_with_a_fast_machine() -> None:
    """At target 300 a machine has died: the fleet, at 280.5, is under the band
    until its cover proves, and the fast offers (25 proofs/h, 8 % of the
    target) are too large to be bridges. The cheapest cover is a slow host;
    the autopilot rents the fast one of the same size, 17 % dearer, 1.4 % of
    the fleet's $/h. Where the fleet stays inside the band meanwhile (a
    smaller loss), it rents the cheapest."""
    rows = [machine(i, 25.5, 0.21) for i in range(1, 12)]  # 280.5 proofs/h, $2.31/h
    offers = [_offer(1, 24.8, 0.2099, 29), _offer(2, 24.8, 0.2455, 13), _offer(3, 24.8, 0.27, 14)]
    for fleet, want in ((rows, 2), ([*rows, machine(20, 5.0, 0.05)], 1)):
        result = "Found 3 offers.\n" + json.dumps(offers)
        reply = await reply_to_search(context_of(fleet, 300), result, TOOLS)
        creates = [b["input"] for b in reply if b["type"] == "tool_use"]
        assert [c["offer_id"] for c in creates] == [want]
        assert not any(c.get("temporary") for c in creates)


def test_the_model_is_told_of_the_fast_cover() -> None:
    text = system_prompt("a")
    assert "no temporary machine fits" in text
    assert f"costs at most {100 * FAST_COVER_PREMIUM:g} % more per hour" in text
