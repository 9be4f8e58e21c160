"""Guardrails read the live config: an `update_config` accepted while a run is
in flight applies to that run's next fleet tool call. On the time-skipping
server, with the real workflows, the real anthropic client against the fake
Messages API, and the simulator over HTTP."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.fleet.guardrails import offer_refusal
from fleet_agent.fleet.offer_query import offer_filters
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.models import AgentConfig
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import eventually, running_worker, wait_runs
from workflows import FleetAgentWorkflow

DONE = 'Done.\n<verdict>{"action": true, "state_changed": true}</verdict>'


async def _rentable_offer(sim: SimServer) -> int:
    """An offer the default guardrails accept, so only the config change can stop it."""
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        # The guardrails' own search filters: in a realistic market most hosts
        # fail one of them (unverified, too little RAM, no open ports, ...).
        filters = offer_filters(AgentConfig(), ProverSpec(), await vast.gpu_names())
        filters["gpu_name"] = {"eq": "RTX 4090"}
        offers = await vast.search_offers(
            filters, order="dph_total", limit=50, allocated_storage=ProverSpec().disk_gb
        )
    # Checked again as the create checks it: a slice of a host has its share of the RAM.
    fit = [o for o in offers if offer_refusal(o, AgentConfig(), ProverSpec()) is None]
    assert fit
    return fit[0].id


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"dry_run": True}, "DRY RUN"),
        ({"max_instances": 0}, "cap 0"),
        ({"paused": True}, "the agent is paused"),
    ],
    ids=["dry_run", "max_instances_0", "paused"],
)
async def test_config_accepted_before_a_create_applies_to_it(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
    patch: dict[str, Any],
    expected: str,
) -> None:
    """The model decides to rent; before its tool call runs, the operator's
    update is accepted. The create of that same run is refused by it."""
    offer = await _rentable_offer(sim)
    decided, released = threading.Event(), threading.Event()

    def model(req: Request) -> Reply:
        if req.tool_results():
            return Reply(text=DONE)
        # The model's first decision waits until the test has changed the config.
        decided.set()
        if not released.wait(timeout=60):
            raise RuntimeError("the test never released the model's decision")
        return Reply(
            text="Renting one machine.",
            tool_calls=[("create_instance", {"offer_id": offer, "reason": "capacity"})],
        )

    fake_llm.set_responder(model)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await h.start_agent(target_proofs_per_hour=20, monitor_enabled=False)
        await ts_env.sleep(11)  # the start-up window

        async def deciding() -> bool:
            return decided.is_set()

        await eventually(deciding, what="the model's first decision")
        config = await handle.execute_update(FleetAgentWorkflow.update_config, patch)
        assert all(getattr(config, k) == v for k, v in patch.items())
        released.set()
        await wait_runs(store, handle.id, 1)
    results = [r for q in fake_llm.requests for r in q.tool_results()]
    assert results, "the create's result went back to the model"
    assert expected in str(results[0]["content"]), results[0]
    assert sim.market.instance_ids() == [], "nothing was rented"
    assert sim.market.counters["creates"] == 0
