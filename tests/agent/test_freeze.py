"""The kill switch: freeze (with destroy_all) and unfreeze, against the simulator
over HTTP with the real client, on the time-skipping server."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.models import AgentConfig, AgentState, FreezeInfo, FreezeReport, Phase
from fleet_agent.store import Store
from fleet_agent.visibility.details import agent_details
from simulator.server import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers import eventually, running_worker, status
from tests.helpers.fleet import _req
from workflows import FleetAgentWorkflow


def _live(sim: SimServer) -> list[dict[str, Any]]:
    """Machines the simulator still bills for (not released)."""
    return [i for i in sim.market.state()["instances"] if i["cur_state"] != "unloaded"]


async def test_freeze_with_destroy_all_on_a_fleet_of_20_leaves_nothing_and_rents_nothing(
    ts_env: WorkflowEnvironment, store: Store, sim: SimServer, fleet: FleetActivities
) -> None:
    async with running_worker(ts_env.client, store, provider=AutopilotProvider(), fleet=fleet) as h:
        handle = await h.start_agent(
            target_proofs_per_hour=5_000,
            max_instances=20,
            max_fleet_dph=200,
            max_instance_dph=20,
            # The default $500 a day refuses the 20th machine when the test
            # runs just after midnight UTC: 19 machines at ~$1.1/h for the
            # ~24 h left in the day are the whole budget (fleet/budget.py).
            # The sim's clock is the wall clock; the budget is not this test's.
            daily_budget_usd=100_000,
            monitor_poll_seconds=30,
        )

        async def twenty() -> bool:
            sim.market.advance(60)
            await ts_env.sleep(60)
            return len(_live(sim)) >= 20

        await eventually(twenty, timeout=120, what="a fleet of 20")
        billed = sum(float(i["dph_total"]) for i in _live(sim))
        report: FreezeReport = await handle.execute_update(
            FleetAgentWorkflow.freeze,
            {"reason": "budget blown", "destroy_all": True, "author": "ops"},
        )
        assert report.frozen and not report.already_frozen and not report.error, report
        assert report.fleet is not None and len(report.fleet.destroyed) == 20
        assert report.fleet.dph_stopped == pytest.approx(billed, rel=1e-3)
        # The answer is the truth at vast.ai: nothing of this agent is billed.
        assert _live(sim) == []
        st = await status(handle)
        assert st.phase == Phase.FROZEN and st.config.frozen
        assert st.frozen is not None and st.frozen.reason == "budget blown"
        runs_then, creates_then = st.run_count, int(sim.market.state()["counters"]["creates"])

        # Everything that would start a run: nothing runs, nothing is rented.
        await handle.signal(FleetAgentWorkflow.human_message, "rent 20 machines now")
        await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "go"})
        for _ in range(12):
            sim.market.advance(300)
            await ts_env.sleep(300)
        st = await status(handle)
        assert st.run_count == runs_then and st.current_run is None
        assert sim.market.state()["counters"]["creates"] == creates_then
        assert _live(sim) == []
        monitor = await ts_env.client.get_workflow_handle(f"{handle.id}/monitor").describe()
        assert monitor.status == WorkflowExecutionStatus.COMPLETED

        again = await handle.execute_update(FleetAgentWorkflow.freeze, {})
        assert again.already_frozen and again.info.reason == "budget blown"

        config = await handle.execute_update(
            FleetAgentWorkflow.unfreeze, {"reason": "budget raised"}
        )
        assert not config.frozen

        async def renting_again() -> bool:
            sim.market.advance(60)
            await ts_env.sleep(60)
            return int(sim.market.state()["counters"]["creates"]) > creates_then

        await eventually(renting_again, timeout=60, what="the agent to rent again")
        st = await status(handle)
        assert st.frozen is None and st.run_count > runs_then
        monitor = await ts_env.client.get_workflow_handle(f"{handle.id}/monitor").describe()
        assert monitor.status == WorkflowExecutionStatus.RUNNING


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ({"destroy_all": "yes"}, "destroy_all"),
        ({"reason": "x" * 600}, "reason"),
        ({"bogus": 1}, "bogus"),
        ("now", "expected a JSON object"),
        ({"author": ""}, "author"),
    ],
)
async def test_a_bad_freeze_is_refused_clearly_and_changes_nothing(
    ts_env: WorkflowEnvironment, store: Store, fleet: FleetActivities, raw: Any, error: str
) -> None:
    async with running_worker(ts_env.client, store, provider=AutopilotProvider(), fleet=fleet) as h:
        handle = await h.start_agent(monitor_enabled=False)
        with pytest.raises(WorkflowUpdateFailedError) as err:
            await handle.execute_update(FleetAgentWorkflow.freeze, raw)
        assert error in str(err.value.cause), err.value.cause
        st = await status(handle)
        assert not st.config.frozen and st.frozen is None and st.phase != Phase.FROZEN
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(FleetAgentWorkflow.unfreeze, {"destroy_all": True})
        # The loop goes on: a message still gets its run.
        before = st.run_count
        await handle.signal(FleetAgentWorkflow.human_message, "still there?")

        async def answered() -> bool:
            return (await status(handle)).run_count > before

        await eventually(answered, timeout=30, what="a run after the refusal")


async def test_a_frozen_agent_refuses_every_mutating_tool_call(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    env = ActivityEnvironment()
    found = await env.run(tools.search_offers, _req("search_offers", {"limit": 2}))
    offers = [int(part.split(",")[0]) for part in found.content.split('"offer_id":')[1:]]
    rent = {"offer_id": offers[0], "reason": "r"}
    rented = await env.run(tools.create_instance, _req("create_instance", rent))
    assert rented.mutating, rented.content
    (machine,) = sim.market.instance_ids()
    configs.config = AgentConfig(frozen=True, min_release_age_minutes=0)
    again = await env.run(tools.search_offers, _req("search_offers", {"limit": 2}))
    assert not again.is_error, "reads go on while frozen"
    refused = [
        await env.run(
            tools.create_instance, _req("create_instance", {"offer_id": offers[1], "reason": "r"})
        ),
        await env.run(
            tools.destroy_instance,
            _req("destroy_instance", {"instance_id": machine, "reason": "r"}),
        ),
    ]
    for result in refused:
        assert result.is_error and not result.mutating and "frozen" in result.content, result
    assert sim.market.instance_ids() == [machine]


def test_the_web_uis_details_show_a_freeze_first() -> None:
    at = datetime(2026, 11, 29, 9, 30, tzinfo=UTC)
    state = AgentState(
        config=AgentConfig(frozen=True),
        freeze=FreezeInfo(reason="budget blown", author="ops", at=at, destroy_all=True),
    )
    first = agent_details(state, Phase.FROZEN, None, None).split("\n\n")[0]
    assert first.startswith("**FROZEN** by ops at 09:30:00") and "budget blown" in first
    assert "unfreeze" in first
    plain = agent_details(AgentState(), Phase.IDLE, None, None)
    assert "FROZEN" not in plain
