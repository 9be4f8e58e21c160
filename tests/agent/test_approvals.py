"""Approvals: a run waits durably for an operator, who approves, denies or lets
it time out; a freeze denies what is pending. The model is a scripted one
behind the fake Messages API (real anthropic client); vast.ai is the
simulator over HTTP; the time-skipping server makes an hour's wait instant.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import (
    AgentState,
    ApprovalOutcome,
    PendingApproval,
    Phase,
    SpendSummary,
)
from fleet_agent.store import Store
from fleet_agent.visibility.details import agent_details
from simulator.server import SimServer
from testkit.fakes.anthropic_server import FakeAnthropic
from tests.helpers import eventually, first_pending, running_worker, status
from tests.helpers.approvals import Agent, create_result, creates, renter, start
from workflows import FleetAgentWorkflow


async def test_an_approved_create_rents_once_and_says_who_approved(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    fake_llm.set_responder(renter)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await start(h)
        pending = await first_pending(handle)
        assert pending.tool == "create_instance" and pending.run == 1
        assert pending.dph > 0.01 and "approval_above_dph" in pending.reason
        assert pending.expires_at - pending.asked_at == timedelta(hours=1)
        assert pending.arguments["offer_id"] > 0
        # While it waits, nothing is rented and the run is still going.
        await ts_env.sleep(600)
        st = await status(handle)
        assert creates(sim) == 0 and st.current_run == 1 and st.phase == Phase.RUNNING
        # Other triggers queue as usual while the run waits.
        await handle.signal(FleetAgentWorkflow.human_message, {"text": "while you wait"})
        st = await status(handle)
        assert [t.kind.value for t in st.pending_triggers] == ["human_message"]

        # Unknown and malformed decisions are refused before they reach history.
        unknown = await _refused(handle, {"approval_id": "a9-9", "approve": True})
        assert f"no pending approval 'a9-9' (pending: {pending.id})" in unknown
        assert "approve" in await _refused(handle, {"approval_id": pending.id, "approve": "yes"})
        assert "bogus" in await _refused(handle, {"approval_id": pending.id, "bogus": 1})

        outcome: ApprovalOutcome = await handle.execute_update(
            FleetAgentWorkflow.decide_approval,
            {"approval_id": pending.id, "approve": True, "note": "go", "author": "alice"},
        )
        assert outcome.decision.approve and outcome.error == ""
        assert outcome.approval.id == pending.id

        async def rented() -> bool:
            st = await status(handle)
            return st.last_run is not None and st.last_run.run == 1

        await eventually(rented, timeout=60, what="run 1 to end")
        assert creates(sim) == 1

        async def next_run_took_the_message() -> bool:
            st = await status(handle)
            return st.run_count >= 2 and not st.pending_triggers

        await eventually(next_run_took_the_message, timeout=60, what="run 2 to take the message")
        told = create_result(fake_llm)
        assert "Approved by alice" in told and pending.id in told and "go" in told
        st = await status(handle)
        assert all(p.id != pending.id for p in st.pending_approvals)  # run 2 may ask anew
        again = await _refused(handle, {"approval_id": pending.id, "approve": False})
        assert "already decided: approved by alice (operator)" in again


async def test_a_denied_or_expired_approval_rents_nothing_and_the_model_reads_why(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    fake_llm.set_responder(renter)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await start(h, approval_timeout_seconds=120)
        first = await first_pending(handle)
        await handle.execute_update(
            FleetAgentWorkflow.decide_approval,
            {"approval_id": first.id, "approve": False, "note": "too dear", "author": "bob"},
        )
        await eventually(
            lambda: _ended(handle, first.run), timeout=60, what="the denied run to end"
        )
        told = create_result(fake_llm)
        assert "denied by bob: too dear" in told and "Nothing was rented" in told
        assert creates(sim) == 0

        # The next run asks again; nobody answers within approval_timeout_seconds.
        await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "try again"})
        second = await first_pending(handle)
        assert second.id != first.id and second.run > first.run
        assert second.expires_at - second.asked_at == timedelta(seconds=120)
        await ts_env.sleep(130)
        await eventually(
            lambda: _ended(handle, second.run), timeout=60, what="the expired run to end"
        )
        assert "was not approved: no operator decided within 120 s" in create_result(fake_llm)
        assert creates(sim) == 0
        st = await status(handle)
        assert st.pending_approvals == []
        late = await _refused(handle, {"approval_id": second.id, "approve": True})
        assert "already decided: denied by fleet-agent (timeout)" in late


async def test_a_freeze_denies_the_pending_approval(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    fake_llm.set_responder(renter)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await start(h)
        pending = await first_pending(handle)
        await handle.execute_update(FleetAgentWorkflow.freeze, {"reason": "audit", "author": "ops"})
        await eventually(lambda: _ended(handle, pending.run), timeout=60, what="the run to end")
        told = create_result(fake_llm)
        assert "denied by the kill switch (ops): the agent was frozen: audit" in told
        assert creates(sim) == 0
        st = await status(handle)
        assert st.pending_approvals == [] and st.phase == Phase.FROZEN


async def _refused(handle: Agent, raw: Any) -> str:
    """The validator's message for a decision it refuses."""
    with pytest.raises(WorkflowUpdateFailedError) as err:
        await handle.execute_update(FleetAgentWorkflow.decide_approval, raw)
    return str(err.value.cause)


async def _ended(handle: Agent, run: int) -> bool:
    st = await status(handle)
    return st.last_run is not None and st.last_run.run >= run


def test_pending_approvals_lead_the_web_ui_details() -> None:
    state = AgentState()
    pending = PendingApproval(
        id="a3-1",
        run=3,
        run_workflow_id="fleet/run-3",
        tool="create_instance",
        tool_use_id="toolu_1",
        arguments={"offer_id": 42, "reason": "target"},
        dph=1.25,
        reason="the offer costs $1.250/h, above approval_above_dph $1/h",
        asked_at=ts(0),
        expires_at=ts(3600),
    )
    state.pending_approvals = [pending]
    text = agent_details(state, Phase.RUNNING, 3, None)
    first = text.split("\n\n")[0]
    assert first.startswith("**APPROVAL NEEDED** a3-1: run #3 create_instance offer_id=42")
    assert "+1.250 $/h" in first and "fleet-agent approve a3-1" in first
    assert "Spend" not in text  # no run has read the ledger yet
    state.spend = SpendSummary(
        as_of=ts(60), today_usd=12.5, last_24h_usd=30.0, month_usd=400.0, current_dph=1.75
    )
    last = agent_details(state, Phase.RUNNING, 3, None).split("\n\n")[-1]
    assert last.startswith("Spend: today $12.50 (budget $500.00), 24 h $30.00")
    assert "now $1.750/h" in last


def ts(seconds: float) -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 11, 29, 12, 0, tzinfo=UTC) + timedelta(seconds=seconds)
