"""Provisioning through the fleet tools against the simulator: an ambiguous or
crashed create rents exactly one machine, destroy touches only this agent's,
the create keeps the image's entrypoint, an offer gone and a rejected key are
told, not retried."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.config.settings import ProverSpec
from fleet_agent.fleet.labels import create_label
from fleet_agent.store import Store, ToolJournal
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers.fleet import AGENT, _cheapest_offer, _instances, _req


@pytest.mark.parametrize("fault", ["create_hang_next", "create_error_next"])
async def test_ambiguous_create_rents_exactly_one_machine(
    tools: FleetActivities, sim: SimServer, fault: str
) -> None:
    """A create that rents and then times out (or answers 5xx) is adopted by
    label; the activity's retry, same tool call, rents nothing more."""
    faults: dict[str, Any] = {fault: 1, "hang_seconds": 4.0}
    sim.market.set_faults(**faults)
    offer = await _cheapest_offer(tools)
    req = _req("create_instance", {"offer_id": offer, "reason": "test"}, tool_id="toolu_fixed")
    env = ActivityEnvironment()
    first = await env.run(tools.create_instance, req)
    assert first.mutating and not first.is_error, first.content
    assert "answer was lost" in first.content
    again = await env.run(tools.create_instance, req)  # what a Temporal retry does
    assert again.replayed and again.content.endswith(first.content)
    instances = _instances(sim)
    assert len(instances) == 1
    assert instances[0]["label"] == create_label(AGENT, 1, "toolu_fixed")
    assert str(instances[0]["id"]) in first.content


async def test_crash_mid_create_adopts_the_machine_by_label(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    """A worker died after the rental reached vast.ai and before the result
    was recorded: the journal says "started", the label finds the machine."""
    offer = await _cheapest_offer(tools)
    req = _req("create_instance", {"offer_id": offer, "reason": "test"}, tool_id="toolu_crash")
    ToolJournal(store).start(req, datetime.now(UTC))
    label = create_label(AGENT, 1, "toolu_crash")
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        rented = await vast.create_instance(offer, image="x", disk=10, label=label)
    result = await ActivityEnvironment().run(tools.create_instance, req)
    assert result.mutating and not result.is_error and not result.replayed
    assert f"instance {rented}" in result.content and "found after a retry" in result.content
    assert [i["id"] for i in _instances(sim)] == [rented]
    assert sim.market.counters["creates"] == 1
    record = ToolJournal(store).get(AGENT, "toolu_crash")
    assert record is not None and record.status == "done" and record.result == result


async def test_destroy_only_touches_this_agents_machines(
    tools: FleetActivities, sim: SimServer
) -> None:
    env = ActivityEnvironment()
    offer = await _cheapest_offer(tools)
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        foreign = await vast.create_instance(offer, image="x", disk=10, label="someone-else")
    result = await env.run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": foreign, "reason": "r"})
    )
    assert result.is_error and "not this agent's" in result.content
    assert [i["id"] for i in _instances(sim)] == [foreign]


async def test_a_create_keeps_the_images_entrypoint_and_maps_its_status_port(
    tools: FleetActivities, sim: SimServer
) -> None:
    offer = await _cheapest_offer(tools)
    result = await ActivityEnvironment().run(
        tools.create_instance, _req("create_instance", {"offer_id": offer, "reason": "r"})
    )
    assert result.mutating and not result.is_error, result.content
    (machine,) = _instances(sim)
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        shown = await vast.show_instance(machine["id"])
    assert shown is not None and shown.extras["image_runtype"] == "args"
    assert ["-p 9100:9100", "1"] in shown.extras["extra_env"]
    assert shown.disk_space == ProverSpec().disk_gb


async def test_an_offer_gone_is_told_to_the_model_and_not_retried(
    tools: FleetActivities, sim: SimServer
) -> None:
    offer = await _cheapest_offer(tools)
    sim.market.set_faults(offer_taken_next=1)
    result = await ActivityEnvironment().run(
        tools.create_instance, _req("create_instance", {"offer_id": offer, "reason": "r"})
    )
    assert result.is_error and not result.mutating
    assert "is gone" in result.content and "do not retry this offer" in result.content
    assert sim.market.counters["creates"] == 1, "one rental request, no retry"
    assert _instances(sim) == []


async def test_a_rejected_key_fails_fleet_tools_for_good(
    sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    """The search answers a bad key with a 404: a permanent authentication
    failure that says what to fix, never "not found" and never retried."""
    async with VastClient("not-the-key", sim.url, pacing=NO_PACING) as bad:
        fleet = FleetActivities(bad, ProverSpec(mode="curio_on_host"), store=store, configs=configs)
        env = ActivityEnvironment()
        for req in (_req("search_offers", {}), _req("get_fleet_status", {})):
            with pytest.raises(ApplicationError) as info:
                await env.run(getattr(fleet, req.name), req)
            assert info.value.type == "VastAuthFailed" and info.value.non_retryable
            assert "Invalid user key" in info.value.message
            assert "VAST_API_KEY" in info.value.message
