"""Nothing spends behind our back (issue 42): each attack on the create tool's
money rules, performed against the real activities and the simulator over
HTTP.

- A machine rented at a price over the caps (the host repriced between
  search and rental) is destroyed at once, and the model is told.
- An approval holds its price: an offer that costs more by the time the
  approved call comes back asks again; a rental billed above it is undone.
- A create in flight (journalled, no result) counts against every cap.
- A missing, negative or NaN price never counts as $0.
- A freeze that races a create leaves nothing of the agent running: the
  create reads the config again just before its rental and after it, and
  `stop_fleet` waits for creates in flight.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities import fleet_stop
from activities.fleet import FleetActivities
from activities.fleet_create import Renter
from fleet_agent.fleet.guardrails import fleet_dph, offer_refusal, rent_refusal, rented_refusal
from fleet_agent.models import AgentConfig, ApprovalDecision, StopFleetRequest, ToolResult
from fleet_agent.store import SpendLedger, Store, ToolJournal
from fleet_agent.vast.models import Instance, Offer
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers import eventually
from tests.helpers.spend import (
    AGENT,
    NOON,
    create_instance,
    first_offer,
    live_instances,
    sim,
    spend_req,
    tools,
)

__all__ = ["sim", "tools"]  # the fixtures, imported for pytest


def _now(sim: SimServer) -> datetime:
    return datetime.fromtimestamp(sim.market.now(), UTC)


def _grant(dph: float) -> ApprovalDecision:
    return ApprovalDecision(
        approval_id="a1-1", approve=True, at=NOON, author="op", approved_dph=dph
    )


# ------------------------------------------------------------ after the rental


async def test_a_rental_billed_over_the_cap_is_destroyed_at_once(
    tools: FleetActivities, sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    offer = await first_offer(tools)
    # The offer fits the cap; the host doubles its price before the rental.
    configs.config = AgentConfig(min_release_age_minutes=0, max_instance_dph=offer["dph"] * 1.2)
    sim.market.set_faults(price_rise_next=1, price_rise_factor=2.0)
    result = await create_instance(tools, offer["offer_id"])
    assert result.is_error and result.mutating and result.dph_delta == 0, result.content
    assert "per-instance cap" in result.content and "destroyed at once" in result.content
    assert "operator is alerted" in result.content
    assert live_instances(sim) == []
    (line,) = SpendLedger(store).instances(AGENT)
    assert line.closed_by == "destroyed"


async def test_a_rental_billed_within_the_caps_stays(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    offer = await first_offer(tools)
    configs.config = AgentConfig(min_release_age_minutes=0, max_instance_dph=offer["dph"] * 3)
    sim.market.set_faults(price_rise_next=1, price_rise_factor=2.0)
    result = await create_instance(tools, offer["offer_id"])
    assert result.mutating and not result.is_error, result.content
    assert len(live_instances(sim)) == 1


async def test_an_approved_create_whose_offer_now_costs_more_asks_again(
    tools: FleetActivities, sim: SimServer
) -> None:
    offer = await first_offer(tools)
    sim.market.reprice_offer(offer["offer_id"], 1.5)  # during the operator's hour
    again = await create_instance(tools, offer["offer_id"], _grant(offer["dph"]))
    assert again.approval is not None and not again.mutating, again.content
    assert f"rose from the ${offer['dph']:.3f}/h approved" in again.approval.reason
    assert again.approval.dph > offer["dph"]
    assert live_instances(sim) == []
    # Approved at the new price, it rents.
    made = await create_instance(tools, offer["offer_id"], _grant(again.approval.dph))
    assert made.mutating and not made.is_error, made.content


async def test_an_approved_rental_billed_above_the_approved_price_is_undone(
    tools: FleetActivities, sim: SimServer
) -> None:
    offer = await first_offer(tools)
    sim.market.set_faults(price_rise_next=1, price_rise_factor=1.3)
    result = await create_instance(tools, offer["offer_id"], _grant(offer["dph"]))
    assert result.is_error and result.mutating, result.content
    assert "an operator approved" in result.content and "destroyed at once" in result.content
    assert live_instances(sim) == []


# ------------------------------------------------------------ reservations


async def test_a_create_in_flight_counts_against_every_cap(
    tools: FleetActivities, sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    offer = await first_offer(tools)
    # Another call (a run that timed out) started a create and has no result yet.
    other = spend_req("create_instance", {"offer_id": 1, "reason": "r"})
    ToolJournal(store).start(other, _now(sim), reserved_dph=2.0)
    configs.config = AgentConfig(min_release_age_minutes=0, max_instances=1)
    refused = await create_instance(tools, offer["offer_id"])
    assert refused.is_error and "1 more being rented" in refused.content, refused.content
    configs.config = AgentConfig(
        min_release_age_minutes=0, max_instances=5, max_fleet_dph=2.0 + offer["dph"] - 0.01
    )
    refused = await create_instance(tools, offer["offer_id"])
    assert refused.is_error and "fleet spend would be" in refused.content, refused.content
    configs.config = AgentConfig(min_release_age_minutes=0, daily_budget_usd=48.0)
    refused = await create_instance(tools, offer["offer_id"])
    assert refused.content.startswith("Refused by the daily budget"), refused.content
    assert "creates in flight $2.000/h" in refused.content
    # Once the other call has its result, its reservation is gone.
    ToolJournal(store).finish(
        other,
        ToolResult(tool_use_id=other.tool_use_id, name=other.name, content="x"),
        _now(sim),
    )
    configs.config = AgentConfig(min_release_age_minutes=0, max_instances=1)
    assert (await create_instance(tools, offer["offer_id"])).mutating


# ------------------------------------------------------------ prices fail closed


def _instance(iid: int, dph: float | None) -> Instance:
    # A host that charges nothing for downloads: only the rental counts here.
    return Instance.model_validate(
        {
            "id": iid,
            "actual_status": "running",
            "label": f"{AGENT}/r1/t{iid}",
            "dph_total": dph,
            "inet_down_cost": 0.0,
        }
    )


def test_a_machine_without_a_usable_price_counts_at_the_cap() -> None:
    missing = _instance(1, None)
    nan = Instance.model_validate({"id": 2, "actual_status": "running", "dph_total": "nan"})
    negative = _instance(3, -5.0)
    assert nan.dph_total is None or nan.dph_total != nan.dph_total
    assert fleet_dph([missing, nan, negative, _instance(4, 0.5)], unpriced=2.0) == 6.5
    config = AgentConfig(max_instance_dph=2.0, max_fleet_dph=2.9)
    offer = Offer.model_construct(
        id=9,
        gpu_name="RTX 4090",
        dph_total=0.5,
        reliability2=0.99,
        num_gpus=1,
        gpu_ram=24_000,
        cpu_ram=128_000,
        inet_down_cost=0.0,
    )
    # $0 for the unpriced machine would let it pass: 0 + 0.5 + 0.5 <= 2.9.
    reason = rent_refusal(offer, [missing, _instance(4, 0.5)], config)
    assert reason is not None and "fleet spend would be $3.00/h with downloads" in reason


def test_a_nan_price_is_over_every_cap() -> None:
    config = AgentConfig(max_instance_dph=2.0)
    offer = Offer.model_construct(
        id=9,
        gpu_name="RTX 4090",
        dph_total=float("nan"),
        reliability2=0.99,
        num_gpus=1,
        gpu_ram=24_000,
        cpu_ram=128_000,
    )
    reason = offer_refusal(offer, config)
    assert reason is not None and "per-instance cap" in reason
    rented = _instance(1, None).model_copy(update={"dph_total": float("nan")})
    assert rented_refusal(rented, [rented], config) == "vast.ai states no usable price for it"


# ------------------------------------------------------------ freeze against a create


async def _freeze_during_a_held_create(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> tuple[ToolResult, Any]:
    """A create whose rental the simulator holds; meanwhile the agent is
    frozen (the config first, as the freeze update does) and `stop_fleet`
    destroys all. The hold ends once the stop has returned or has waited a
    second for the create in flight: never before the freeze (a hold of 3 s
    of real time once ended first on a loaded machine). Returns both results."""
    offer = await first_offer(tools)
    released = threading.Event()
    # The create_delay fault's wait, in the request's thread: until released.
    kept_wait = sim._api._wait
    sim._api._wait = lambda seconds: released.wait(60) and False
    try:
        sim.market.set_faults(create_delay_next=1, create_delay_seconds=60.0)
        create = asyncio.create_task(create_instance(tools, offer["offer_id"]))

        async def held() -> bool:
            return bool(sim.market.counters["create_delays"] == 1)

        await eventually(held, what="the rental held by the simulator")
        configs.config = AgentConfig(min_release_age_minutes=0, frozen=True)
        stop = asyncio.create_task(
            ActivityEnvironment().run(
                tools.stop_fleet, StopFleetRequest(agent_id=AGENT, destroy_all=True)
            )
        )
        await asyncio.wait({stop}, timeout=1.0)
        released.set()
        return await create, await stop
    finally:
        released.set()
        sim._api._wait = kept_wait


async def test_a_freeze_during_a_held_create_leaves_nothing_running(
    tools: FleetActivities,
    sim: SimServer,
    configs: StaticConfigs,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fleet_stop, "CHECK_EVERY_S", 0.2)
    result, _ = await _freeze_during_a_held_create(tools, sim, configs)
    assert result.is_error and "frozen while the rental was in flight" in result.content
    assert sim.market.counters["creates"] == 1 and live_instances(sim) == []


async def test_stop_fleet_alone_waits_for_the_create_in_flight_and_destroys_it(
    tools: FleetActivities,
    sim: SimServer,
    configs: StaticConfigs,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The create's own look at the config after its rental switched off:
    # the stop must still leave nothing running.
    async def keep(self: Renter, req: Any, result: ToolResult, *a: Any, **k: Any) -> ToolResult:
        return result

    monkeypatch.setattr(Renter, "hold", keep)
    monkeypatch.setattr(fleet_stop, "CHECK_EVERY_S", 0.2)
    result, report = await _freeze_during_a_held_create(tools, sim, configs)
    assert result.mutating and not result.is_error, result.content
    assert live_instances(sim) == [] and len(report.destroyed) == 1


async def test_the_create_alone_undoes_a_rental_that_lands_after_the_stop(
    tools: FleetActivities,
    sim: SimServer,
    configs: StaticConfigs,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The stop's wait for creates switched off: it returns at once, and the
    # rental lands after it. The create's look at the config undoes it.
    async def none_flying(self: FleetActivities, agent_id: str) -> int:
        return 0

    monkeypatch.setattr(FleetActivities, "_flying", none_flying)
    result, report = await _freeze_during_a_held_create(tools, sim, configs)
    assert report.destroyed == []
    assert result.is_error and "frozen while the rental was in flight" in result.content
    assert live_instances(sim) == []


async def test_a_freeze_before_the_rental_call_rents_nothing(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    # The freeze lands while the create checks its guardrails: the config
    # read just before the rental sees it.
    offer = await first_offer(tools)
    reads = 0
    open_config = AgentConfig(min_release_age_minutes=0)

    class FreezesOnSecondRead:
        async def live_config(self, agent_id: str) -> AgentConfig:
            nonlocal reads
            reads += 1
            return open_config if reads == 1 else open_config.model_copy(update={"frozen": True})

    tools._calls._configs = FreezesOnSecondRead()
    result = await create_instance(tools, offer["offer_id"])
    assert result.is_error and "frozen" in result.content, result.content
    assert reads == 2 and sim.market.counters["creates"] == 0
