"""An approval holds its price (issue 42): when the offer costs more by the
time the operator approves, the run asks again at the new price instead of
renting. Real worker on the time-skipping server, the scripted model behind
the fake Messages API, the simulator over HTTP."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import ApprovalOutcome, PendingApproval
from fleet_agent.store import Store
from simulator.server import SimServer
from testkit.fakes.anthropic_server import FakeAnthropic
from tests.helpers import eventually, first_pending, running_worker, status
from tests.helpers.approvals import Agent, creates, renter, start
from workflows import FleetAgentWorkflow


async def _approve(handle: Agent, pending: PendingApproval) -> None:
    outcome: ApprovalOutcome = await handle.execute_update(
        FleetAgentWorkflow.decide_approval, {"approval_id": pending.id, "approve": True}
    )
    assert outcome.decision.approve and outcome.error == ""


async def test_a_price_that_rose_during_the_wait_is_asked_for_again(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    fake_llm.set_responder(renter)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await start(h)
        first = await first_pending(handle)
        # The host raises its ask while the operator reads the first one.
        assert sim.market.reprice_offer(first.arguments["offer_id"], 1.5)
        await _approve(handle, first)

        async def asked_again() -> PendingApproval | None:
            st = await status(handle)
            return next((p for p in st.pending_approvals if p.id != first.id), None)

        second = await eventually(asked_again, timeout=60, what="the approval asked again")
        assert second is not None
        assert second.tool_use_id == first.tool_use_id and second.run == first.run
        assert "price rose" in second.reason and second.dph > first.dph * 1.4
        assert creates(sim) == 0
        await _approve(handle, second)

        async def run_ended() -> bool:
            st = await status(handle)
            return st.last_run is not None and st.last_run.run == 1

        await eventually(run_ended, timeout=60, what="run 1 to end")
        assert creates(sim) == 1
