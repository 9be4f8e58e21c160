"""The fleet tools' guardrails against the simulator over HTTP (real client):
search within them, read tools without a live config, the live config's
guardrails and pause refusing, bad input, the per-instance price cap."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.config.settings import ProverSpec
from fleet_agent.fleet.labels import create_label
from fleet_agent.models import AgentConfig
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers.fleet import AGENT, _cheapest_offer, _instances, _req


async def test_search_returns_only_offers_within_guardrails(
    tools: FleetActivities, configs: StaticConfigs
) -> None:
    config = AgentConfig(allowed_gpus=["RTX 3090"], max_instance_dph=0.3, min_reliability=0.95)
    configs.config = config  # the live config; the run's is the default
    result = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"limit": 50})
    )
    rows = __import__("json").loads(result.content.split("\n", 1)[1])
    assert rows, result.content
    assert all(
        r["gpu"] == "«RTX 3090»" and r["dph"] <= 0.3 and r["reliability"] >= 0.95 for r in rows
    )
    per_proof = [r["usd_per_100_proofs"] for r in rows]
    assert per_proof == sorted(per_proof), "cheapest per proof first"
    refused = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"gpu_name": "H100 SXM"})
    )
    assert refused.is_error and "not allowed" in refused.content


async def test_read_tools_fall_back_to_the_runs_config_without_a_live_one(
    tools: FleetActivities, configs: StaticConfigs
) -> None:
    configs.config = None  # the live_config query fails
    config = AgentConfig(allowed_gpus=["RTX 3090"])
    result = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"limit": 50}, config)
    )
    rows = __import__("json").loads(result.content.split("\n", 1)[1])
    # The family: "RTX 3090" allows "RTX 3090 Ti" (fleet_agent/fleet/guardrails.py).
    assert rows and all(r["gpu"] in ("«RTX 3090»", "«RTX 3090 Ti»") for r in rows)
    status_ = await ActivityEnvironment().run(tools.get_fleet_status, _req("get_fleet_status", {}))
    assert not status_.is_error and status_.content.startswith("0 instances")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (AgentConfig(max_instances=0), "cap 0"),
        (AgentConfig(max_instance_dph=0.05), "per-instance cap"),
        (AgentConfig(max_fleet_dph=0.05), "fleet spend"),
        (AgentConfig(allowed_gpus=["H100"]), "not allowed"),
        (AgentConfig(min_reliability=1.0), "reliability"),
        (AgentConfig(dry_run=True), "DRY RUN"),
        (AgentConfig(paused=True), "paused"),
    ],
)
async def test_guardrails_of_the_live_config_refuse_and_nothing_is_rented(
    tools: FleetActivities,
    sim: SimServer,
    configs: StaticConfigs,
    config: AgentConfig,
    expected: str,
) -> None:
    """The live config decides, not the config the run started with (here the
    default, under which the rental would go through)."""
    offer = await _cheapest_offer(tools)
    configs.config = config
    result = await ActivityEnvironment().run(
        tools.create_instance,
        _req("create_instance", {"offer_id": offer, "reason": "test"}, AgentConfig()),
    )
    assert expected in result.content
    assert not result.mutating
    assert _instances(sim) == []


async def test_mutating_tools_never_act_without_the_live_config(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    """A failed live_config query is a retryable error, never a rental on the
    run's (possibly stale) config."""
    offer = await _cheapest_offer(tools)
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        mine = await vast.create_instance(
            offer, image="x", disk=10, label=create_label(AGENT, 1, "t")
        )
    configs.config = None
    env = ActivityEnvironment()
    other = await _cheapest_offer(tools, "RTX 3090")
    for req in (
        _req("create_instance", {"offer_id": other, "reason": "r"}),
        _req("destroy_instance", {"instance_id": mine, "reason": "r"}),
    ):
        with pytest.raises(ApplicationError) as info:
            await env.run(getattr(tools, req.name), req)
        assert info.value.type == "LiveConfigUnavailable" and not info.value.non_retryable
    assert [i["id"] for i in _instances(sim)] == [mine]


async def test_paused_agent_refuses_destroy(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    offer = await _cheapest_offer(tools)
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        mine = await vast.create_instance(
            offer, image="x", disk=10, label=create_label(AGENT, 1, "t")
        )
    configs.config = AgentConfig(paused=True)
    result = await ActivityEnvironment().run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": mine, "reason": "r"})
    )
    assert result.is_error and "paused" in result.content and not result.mutating
    assert [i["id"] for i in _instances(sim)] == [mine]


async def test_bad_tool_input_is_a_clear_error(tools: FleetActivities, sim: SimServer) -> None:
    env = ActivityEnvironment()
    result = await env.run(tools.create_instance, _req("create_instance", {"offer_id": "x"}))
    assert result.is_error and "offer_id" in result.content and "reason" in result.content
    result = await env.run(tools.search_offers, _req("search_offers", {"limit": 500}))
    assert result.is_error and "limit" in result.content
    gone = await env.run(
        tools.create_instance, _req("create_instance", {"offer_id": 999999999, "reason": "r"})
    )
    assert gone.is_error and "not available" in gone.content
    assert _instances(sim) == []


async def test_the_per_instance_cap_is_checked_on_the_price_with_our_disk(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    """An offer under the cap at the service's default 5 GB of storage, over
    it with the prover's disk: refused at the price it would really cost."""
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        bare = await vast.search_offers({"gpu_name": {"eq": "RTX 3090"}}, limit=1000)
        priced = {
            o.id: o.dph_total
            for o in await vast.search_offers(
                {"gpu_name": {"eq": "RTX 3090"}},
                limit=1000,
                allocated_storage=ProverSpec().disk_gb,
            )
        }
    offer = max(bare, key=lambda o: priced[o.id] - o.dph_total)
    assert priced[offer.id] > offer.dph_total
    configs.config = AgentConfig(max_instance_dph=(offer.dph_total + priced[offer.id]) / 2)
    result = await ActivityEnvironment().run(
        tools.create_instance, _req("create_instance", {"offer_id": offer.id, "reason": "r"})
    )
    assert result.is_error and "per-instance cap" in result.content
    assert f"${priced[offer.id]:.3f}/h" in result.content
    assert _instances(sim) == []
