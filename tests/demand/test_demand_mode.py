"""Demand mode end to end on the time-skipping server: the simulator's work
source read over HTTP by the real activity, the monitor deciding after its
polls, the agent holding the target it signals and telling its runs why;
and the refusals that keep a fixed agent fixed."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.demand import DemandActivities
from activities.demand_sources import HttpJsonSource
from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.models import DEMAND_TARGET, TriggerKind
from fleet_agent.store import DemandHistory, Store
from simulator import DemandConfig, SimServer
from tests.helpers import eventually, finished_runs, running_worker, status

DEMAND = DemandConfig(curve=((0.0, 600.0),), deadline_minutes=30.0, seed=3)
MODE: dict[str, Any] = {
    "target_mode": "demand",
    "min_target": 50.0,
    "max_target": 2000.0,
    "demand_lower_after_minutes": 10.0,
    "monitor_poll_seconds": 60,
    "heartbeat_seconds": 36_000,
    # The fleet is not the point: a small one keeps the runs short.
    "max_instances": 2,
}


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(
        seed=11, speed=0, scenario="ideal", offers=500, rate_limits=False, demand=DEMAND
    ) as server:
        yield server


def _source(sim: SimServer) -> DemandActivities:
    return DemandActivities(HttpJsonSource(f"{sim.url}/demand"))


async def test_the_target_follows_demand_up_then_down(
    ts_env: WorkflowEnvironment, store: Store, sim: SimServer, fleet: FleetActivities
) -> None:
    async with running_worker(
        ts_env.client, store, provider=AutopilotProvider(), fleet=fleet, demand=_source(sim)
    ) as h:
        handle = await h.start_agent(target_proofs_per_hour=100, **MODE)

        async def target() -> float:
            sim.market.advance(60)
            await ts_env.sleep(60)
            return (await status(handle)).config.target_proofs_per_hour

        async def raised() -> float:
            value = await target()
            return value if value >= 600 else 0.0

        high = await eventually(raised, timeout=90, what="the target raised to the demand")
        st = await status(handle)
        assert st.demand is not None and st.demand.action == "raise"
        assert st.demand.point is not None and st.demand.point.backlog > 0
        points = DemandHistory(store).series(handle.id, st.demand.point.at.replace(year=2000))
        assert len(points) >= 2, "one point per poll with a reading"

        async def told() -> bool:
            sim.market.advance(30)
            await ts_env.sleep(30)
            return any(
                t.kind == TriggerKind.CONFIG_CHANGED and "(demand: raise" in t.reason
                for r in finished_runs(store, handle.id)
                for t in r.triggers
            )

        await eventually(told, timeout=60, what="a run told of the demand's raise")

        # The work stops: the target comes down once the wait is over, not before.
        sim.market.set_demand(dataclasses.replace(DEMAND, curve=((0.0, 0.0),)))

        async def lowered() -> float:
            value = await target()
            return value if value < high else 0.0

        low = await eventually(lowered, timeout=120, what="the target lowered")
        st = await status(handle)
        assert st.demand is not None and st.demand.action == "lower", st.demand
        assert "for" in st.demand.reason and "min" in st.demand.reason
        assert low >= MODE["min_target"]


async def test_a_fixed_agent_refuses_demand_targets_and_keeps_its_own(
    ts_env: WorkflowEnvironment, store: Store
) -> None:
    async with running_worker(ts_env.client, store, provider=AutopilotProvider()) as h:
        handle = await h.start_agent(target_proofs_per_hour=300)
        await handle.signal(DEMAND_TARGET, {"target_per_h": 900.0, "action": "raise"})
        await handle.signal(DEMAND_TARGET, {"target_per_h": "lots", "action": "raise"})
        await handle.signal(DEMAND_TARGET, "900")

        async def refused() -> list[str]:
            st = await status(handle)
            errors = [r.error for r in st.rejected if r.signal == DEMAND_TARGET]
            return errors if len(errors) == 3 else []

        errors = await eventually(refused, what="three refusals")
        assert "not in demand mode" in errors[0]
        assert "target_per_h" in errors[1]
        st = await status(handle)
        assert st.config.target_proofs_per_hour == 300
        assert st.demand is None


async def test_a_demand_agent_clamps_a_target_sent_by_hand(
    ts_env: WorkflowEnvironment, store: Store
) -> None:
    """Anyone may signal the agent (the temporal CLI): the bounds still hold."""
    async with running_worker(ts_env.client, store, provider=AutopilotProvider()) as h:
        handle = await h.start_agent(
            target_proofs_per_hour=300, target_mode="demand", min_target=100, max_target=1000
        )
        await handle.signal(
            DEMAND_TARGET, {"target_per_h": 50_000.0, "action": "raise", "reason": "by hand"}
        )

        async def clamped() -> float:
            st = await status(handle)
            return st.config.target_proofs_per_hour if st.demand is not None else 0.0

        assert await eventually(clamped, what="the target clamped") == 1000
