"""The agent's generic demand source reads the simulator's `GET /demand`:
the two sides of the JSON shape docs/operations/demand-mode.md ("Demand sources")
gives, met over HTTP by the real `read_demand` activity."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from temporalio.testing import ActivityEnvironment

from activities.demand import DemandActivities, source_from_env
from fleet_agent.demand.reading import DemandReadRequest
from fleet_agent.demand.settings import DemandEnv
from simulator import DemandConfig, SimServer


@pytest.fixture
def sim() -> Iterator[SimServer]:
    demand = DemandConfig(curve=((0.0, 120.0),), seed=7)
    with SimServer(
        seed=7, speed=0, scenario="ideal", offers=300, rate_limits=False, demand=demand
    ) as server:
        yield server


async def test_the_http_source_reads_what_the_simulator_holds(sim: SimServer) -> None:
    sim.market.advance(30 * 60)  # half an hour of arrivals, no machine to prove them
    env = DemandEnv.model_validate(
        {"FLEET_DEMAND_SOURCE": "http", "FLEET_DEMAND_URL": f"{sim.url}/demand"}
    )
    acts = DemandActivities(source_from_env(env))
    result = await ActivityEnvironment().run(acts.read_demand, DemandReadRequest(agent_id="a"))
    assert result.reading is not None, result.refusal
    truth = sim.market.state()["demand"]
    reading = result.reading
    assert reading.queued == truth["queued"] > 30, (reading, truth)
    assert reading.in_flight == truth["in_flight"] == 0
    assert reading.arrived_total == truth["arrived"]
    assert reading.deadlines == sorted(reading.deadlines)
    assert len(reading.deadlines) == reading.queued
    # Each deadline is its arrival plus the simulator's 30 minutes: none is
    # more than 30 minutes past the reading, the first within its first minutes.
    first, last = reading.deadlines[0], reading.deadlines[-1]
    assert (last - reading.as_of).total_seconds() <= 30 * 60
    assert (first - reading.as_of).total_seconds() <= 5 * 60
