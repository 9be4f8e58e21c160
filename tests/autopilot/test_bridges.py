"""Bridges: fast temporary machines beside a large gap's cover, and how the
policy treats a temporary machine (fleet_agent/autopilot/bridges.py, policy.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from fleet_agent.autopilot.bridges import BRIDGE_RESERVE, BRIDGE_SEARCH_LIMIT, bridge_room, bridges
from fleet_agent.autopilot.policy import plan_fleet
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.fleet.temporary import TEMPORARY_MIN_AGE_MINUTES
from fleet_agent.llm.prompt import system_prompt
from fleet_agent.models import Wake
from fleet_agent.policy.bridges import BRIDGE_MAX_MACHINES, BRIDGE_SHARE
from fleet_agent.policy.checks import BRIDGE_CHECK_SECONDS, GAP_CHECK_SECONDS
from tests.helpers.policy_rows import context_of, machine, offer, tool_results, trade_check

TOOLS = [{"name": n} for n in ("search_offers", "create_instance", "destroy_instance")]


def _offer(offer_id: int, rate: float, dph: float, load: float | None) -> dict[str, Any]:
    return {**offer(offer_id, rate, dph), "est_load_minutes": load}


def _loading(iid: int, rate: float, dph: float = 0.4, **extra: Any) -> dict[str, Any]:
    """A machine rented minutes ago, still fetching its parameters."""
    return {
        **machine(iid, rate, dph),
        "state": "loading",
        "proofs_per_hour": 0.0,
        "measured_proofs_per_hour": None,
        "age_minutes": 10.0,
        "releasable": False,
        **extra,
    }


def test_bridges_cover_a_share_of_the_slow_machines_with_the_cheapest_fast_offers() -> None:
    cover = [_offer(1, 100, 1.0, 40), _offer(2, 100, 1.0, 55), _offer(3, 50, 0.5, 12)]
    offers = [
        *cover,
        _offer(10, 40, 0.6, 10),
        _offer(11, 40, 0.5, 14),
        _offer(12, 40, 0.3, 30),  # slow: never a bridge
        _offer(13, 45, 0.3, 8),  # fast, but over 5 % of the target
        _offer(14, 40, 0.3, None),  # load unknown: not fast
        _offer(15, 40, 0.55, 9),
        _offer(16, 40, 0.7, 11),
        _offer(17, 20, 0.2, 11),
    ]
    # The share is of the slow machines' 200 proofs/h: all of it, and the
    # five fast offers under 5 % of the target (180) fall short: all five,
    # cheapest per proof first.
    assert BRIDGE_SHARE * 200 == 200
    picked = bridges(offers, cover, gap=250, target=800)
    assert [o["offer_id"] for o in picked] == [17, 11, 15, 10, 16]
    # With more of them, the cheapest set that covers the share.
    more = [*offers, _offer(18, 40, 0.45, 9)]
    assert [o["offer_id"] for o in bridges(more, cover, 250, 800)] == [18, 11, 15, 10, 16]
    # No room left under the hour's create limit: none; room for two: the two cheapest.
    assert bridges(more, cover, 250, 800, room=0) == []
    assert [o["offer_id"] for o in bridges(more, cover, 250, 800, room=2)] == [18, 11]
    assert bridge_room(30, 10, 12) == 30 - 10 - 12 - BRIDGE_RESERVE
    assert bridge_room(30, 20, 12) == 0
    # A gap under 10 % of the target is not bridged, nor a cover that is all fast.
    assert bridges(offers, cover, gap=70, target=800) == []
    assert bridges(offers, [cover[2]], gap=250, target=800) == []
    # Fewer fast offers than the share: all of them.
    assert [o["offer_id"] for o in bridges([*cover, offers[3]], cover, 250, 800)] == [10]
    # Many small ones: at most BRIDGE_MAX_MACHINES, the cheapest per proof.
    small = [_offer(100 + k, 20, 0.2 + k / 100, 10) for k in range(20)]
    slow = [_offer(1, 400, 4.0, 40)]
    many = bridges([*slow, *small], slow, gap=400, target=800)
    assert [o["offer_id"] for o in many] == list(range(100, 100 + BRIDGE_MAX_MACHINES))


def test_a_failure_under_bridges_is_replaced_as_if_they_were_not_there() -> None:
    """The cover's machine fails while the bridges hold the fleet's level:
    the gap is the cover's, not zero (the race's second try left it open)."""
    core = [machine(i, 50.0) for i in range(1, 7)]  # 300, proving
    bridge = [machine(10, 50.0, 0.8, temporary=True, age_minutes=15.0, releasable=False)]
    failed = {**_loading(6, 50.0), "state": "offline"}
    plan = plan_fleet([*core[:5], failed, *bridge], 300)
    assert plan.gap == 50
    assert [iid for iid, _ in plan.destroy] == [6]
    # Without the mark, the fleet held its level and nothing was rented.
    unmarked = {**bridge[0], "temporary": False}
    assert plan_fleet([*core[:5], failed, unmarked], 300).gap == 0


def test_a_bridge_goes_once_the_rest_proves_the_target_and_not_before() -> None:
    proving = [machine(i, 50.0) for i in range(1, 5)]  # 200 proving
    slow = [_loading(5, 50.0), _loading(6, 50.0)]  # 100 loading
    bridge = machine(10, 80.0, 0.9, temporary=True, age_minutes=25.0, releasable=True)
    # The cover still loads: the bridge stays, and no gap is rented for.
    plan = plan_fleet([*proving, *slow, bridge], 300)
    assert plan.destroy == [] and plan.gap == 0
    # The cover proves: the bridge goes, and only it.
    arrived = [machine(5, 50.0), machine(6, 50.0)]
    plan = plan_fleet([*proving, *arrived, bridge], 300)
    assert plan.destroy == [(10, "a temporary machine the rest no longer needs")]
    # With a spare the level is over the target; the bridge goes at the target.
    spared = [machine(i, 25.0) for i in range(1, 13)]  # 300: the level is 310
    small = {**bridge, "expected_proofs_per_hour": 15.0, "proofs_per_hour": 15.0}
    small["measured_proofs_per_hour"] = 15.0
    plan = plan_fleet([*spared, small], 300, spare=True)
    assert plan.hold == 310 and plan.gap == 10
    assert plan.destroy == [(10, "a temporary machine the rest no longer needs")]
    # Too young to go (the guardrail's 21 minutes): kept, and still no cover.
    young = {**bridge, "age_minutes": 15.0, "releasable": False}
    plan = plan_fleet([*proving, *arrived, young], 300)
    assert plan.destroy == [] and plan.gap == 0


async def test_the_autopilot_rents_bridges_beside_a_large_gaps_cover() -> None:
    """Through the provider's own protocol: a 300 proofs/h gap at target 800
    is searched with the tool's maximum, covered, and bridged with temporary
    rentals; a small gap gets a plain search and cover."""
    rows = [machine(i, 50.0) for i in range(1, 11)]  # 500 proofs/h
    context = context_of(rows, 800)
    first = await AutopilotProvider().complete(
        system="s", messages=[{"role": "user", "content": context}], tools=TOOLS, max_tokens=100
    )
    (search,) = first.content
    assert search["name"] == "search_offers" and search["input"] == {"limit": BRIDGE_SEARCH_LIMIT}
    offers = [
        _offer(1, 150, 1.2, 45),
        _offer(2, 150, 1.2, 50),  # the cover: 300 slow proofs/h
        _offer(3, 40, 0.5, 10),
        _offer(4, 40, 0.6, 12),  # bridges (5 % of the target at most)
        _offer(5, 40, 0.9, 60),
    ]
    result = "Found 5 offers.\n" + json.dumps(offers)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": context},
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": search["id"], "content": result}],
        },
    ]
    second = await AutopilotProvider().complete(
        system="s", messages=messages, tools=TOOLS, max_tokens=100
    )
    creates = [b["input"] for b in second.content if b["type"] == "tool_use"]
    assert [(c["offer_id"], c.get("temporary", False)) for c in creates] == [
        (1, False),
        (2, False),
        (3, True),
        (4, True),
    ]
    # Under a create limit of 9 an hour, the cover's two and the reserve of
    # six leave room for one bridge; with 12 instances at most, for none.
    cases: list[tuple[dict[str, Any], list[int]]] = [
        ({"max_creates_per_hour": 9}, [3]),
        ({"max_instances": 12}, []),
    ]
    for limits, bridged in cases:
        tight = [{**messages[0], "content": context_of(rows, 800, **limits)}, *messages[1:]]
        reply = await AutopilotProvider().complete(
            system="s", messages=tight, tools=TOOLS, max_tokens=100
        )
        temps = [b["input"]["offer_id"] for b in reply.content if b["input"].get("temporary")]
        assert temps == bridged, limits
    small = context_of(rows, 520)
    reply = await AutopilotProvider().complete(
        system="s", messages=[{"role": "user", "content": small}], tools=TOOLS, max_tokens=100
    )
    assert reply.content[0]["input"] == {"limit": 30}


def test_the_model_is_told_what_a_temporary_machine_is() -> None:
    text = system_prompt("a")
    assert "`temporary: true`" in text and "est_load_minutes ≤ 15" in text
    assert "replace a failed machine as if it were not there" in text


async def test_the_autopilot_looks_again_while_bridges_remain() -> None:
    """After renting bridges it asks for a run when the oldest may go, at
    least BRIDGE_CHECK_SECONDS ahead; once per run; not once every bridge is
    of age (arrivals wake runs: workflows/monitor.py), nor without bridges."""
    tools = [*TOOLS, {"name": "schedule_next_check"}]
    rows = [machine(i, 50.0) for i in range(1, 11)]
    first = await AutopilotProvider().complete(
        system="s",
        messages=[{"role": "user", "content": context_of(rows, 800)}],
        tools=tools,
        max_tokens=100,
    )
    (search,) = first.content
    offers = [_offer(1, 150, 1.2, 45), _offer(2, 150, 1.2, 50), _offer(3, 40, 0.5, 10)]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": context_of(rows, 800)},
        {"role": "assistant", "content": first.content},
        tool_results(search["id"], "Found 3 offers.\n" + json.dumps(offers)),
    ]
    creates = await AutopilotProvider().complete(
        system="s", messages=messages, tools=tools, max_tokens=100
    )
    assert [b["input"].get("temporary", False) for b in creates.content] == [False, False, True]
    messages += [
        {"role": "assistant", "content": creates.content},
        *(
            tool_results(b["id"], f"Rented instance {900 + k}.")
            for k, b in enumerate(creates.content)
        ),
    ]
    check = await AutopilotProvider().complete(
        system="s", messages=messages, tools=tools, max_tokens=100
    )
    (wake,) = check.content
    assert wake["name"] == "schedule_next_check"
    assert wake["input"]["delay_seconds"] == TEMPORARY_MIN_AGE_MINUTES * 60
    messages += [{"role": "assistant", "content": check.content}, tool_results(wake["id"], "ok")]
    done = await AutopilotProvider().complete(
        system="s", messages=messages, tools=tools, max_tokens=100
    )
    assert done.content[0]["type"] == "text"
    # A bridge 30 minutes old that the cover still needs: no check, the
    # cover's arrivals wake runs of their own (a state change to "proving").
    loading = [*rows[:6], *(_loading(i, 50.0) for i in range(7, 11))]
    bridge = machine(20, 40.0, 0.5, temporary=True, age_minutes=30.0, releasable=True)
    of_age = await AutopilotProvider().complete(
        system="s",
        messages=[{"role": "user", "content": context_of([*loading, bridge], 500)}],
        tools=tools,
        max_tokens=100,
    )
    assert of_age.content[0]["type"] == "text", of_age.content
    # A second bridge 20 minutes old, 1 minute short of its age: a check in
    # BRIDGE_CHECK_SECONDS, the soonest.
    young = machine(21, 40.0, 0.5, temporary=True, age_minutes=20.0, releasable=False)
    again = await AutopilotProvider().complete(
        system="s",
        messages=[{"role": "user", "content": context_of([*loading, bridge, young], 500)}],
        tools=tools,
        max_tokens=100,
    )
    assert [(b["name"], b["input"]["delay_seconds"]) for b in again.content] == [
        ("schedule_next_check", BRIDGE_CHECK_SECONDS)
    ]
    # Not while such a check is pending: a run that another trigger started
    # would begin a second chain of checks, and the runs came every minute.
    pending = Wake(
        id="w7-1",
        due_at=datetime(2026, 12, 2, 0, 2, tzinfo=UTC),
        reason=again.content[0]["input"]["reason"],
        requested_by_run=6,
    )
    context = context_of([*loading, bridge, young], 500, wakes=[pending])
    assert "## Pending wakes\n- w7-1 due 2026-12-02 00:02:00Z: release bridges" in context
    waiting = await AutopilotProvider().complete(
        system="s", messages=[{"role": "user", "content": context}], tools=tools, max_tokens=100
    )
    assert waiting.content[0]["type"] == "text"
    # A wake of another reason does not count.
    other = pending.model_copy(update={"reason": "an instance still loading in 15 min"})
    context = context_of([*loading, bridge, young], 500, wakes=[other])
    reply = await AutopilotProvider().complete(
        system="s", messages=[{"role": "user", "content": context}], tools=tools, max_tokens=100
    )
    assert reply.content[0]["name"] == "schedule_next_check"
    # Nothing left to arrive (every other machine proves) and the bridge old
    # enough to go: no bridge check; still needed (the rest is 2 % under the
    # target, a gap no offer fits), it waits for the heartbeat like any
    # release, and the gap for its own check (open_gap.py).
    proving = [machine(i, 49.0) for i in range(1, 11)]
    context = context_of([*proving, bridge], 500)
    first = await AutopilotProvider().complete(
        system="s", messages=[{"role": "user", "content": context}], tools=tools, max_tokens=100
    )
    (search,) = first.content
    too_big = "1 offer.\n" + json.dumps([_offer(1, 100, 1.0, 40)])
    messages = [
        {"role": "user", "content": context},
        {"role": "assistant", "content": first.content},
        tool_results(search["id"], too_big),
    ]
    settled = await AutopilotProvider().complete(
        system="s", messages=messages, tools=tools, max_tokens=100
    )
    gap_check = ("schedule_next_check", GAP_CHECK_SECONDS)
    assert [(b["name"], b["input"]["delay_seconds"]) for b in settled.content] == [gap_check]
    # The same fleet with the bridge still too young to go: a bridge check
    # too, when it may go.
    young = {**bridge, "age_minutes": 15.0, "releasable": False}
    messages[0] = {"role": "user", "content": context_of([*proving, young], 500)}
    later = await AutopilotProvider().complete(
        system="s", messages=messages, tools=tools, max_tokens=100
    )
    assert [(b["name"], b["input"]["delay_seconds"]) for b in later.content] == [
        gap_check,
        ("schedule_next_check", (TEMPORARY_MIN_AGE_MINUTES - 15) * 60),
    ]
    plain = await AutopilotProvider().complete(
        system="s",
        messages=[{"role": "user", "content": context_of(rows, 500, wakes=[trade_check()])}],
        tools=tools,
        max_tokens=100,
    )
    assert plain.content[0]["type"] == "text"
