"""`observe_demand` when there is nothing to observe: no reading is an
answer with no decision and nothing kept, never a failed activity."""

from __future__ import annotations

from temporalio.testing import ActivityEnvironment

from activities.demand import DemandActivities
from activities.demand_sources import HttpJsonSource
from fleet_agent.demand.point import DemandStepRequest
from fleet_agent.demand.target import DemandPolicy
from fleet_agent.store import DemandHistory, Store

REQUEST = DemandStepRequest(
    agent_id="a", capacity_per_h=100, current_target=200, policy=DemandPolicy(max_target=1000)
)


async def test_no_source_and_a_dead_source_decide_nothing_and_keep_nothing(store: Store) -> None:
    env = ActivityEnvironment()
    for source in (None, HttpJsonSource("http://127.0.0.1:9/demand")):
        acts = DemandActivities(source).with_store(store)
        result = await env.run(acts.observe_demand, REQUEST)
        assert result.decision is None and result.point is None
        assert result.refusal, result
        assert result.summary.startswith(f"demand ({result.source}): no reading")
    assert DemandHistory(store).latest("a") is None
