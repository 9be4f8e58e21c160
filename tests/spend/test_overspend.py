"""The LLM tries to overspend, and the money rules hold.

A scripted model behind the fake Messages API (the real anthropic client, a
real worker on the time-skipping server, the simulator over HTTP) is told by
the operator to rent, and rents: past the daily budget, past the hourly
create rate, and an H100 far above the approval threshold. Every attempt
past a rule is refused, the model reads why, the journal keeps the refusal,
and nothing is rented that a rule forbade. Then the fleet runs for hours
under the monitor, and the spend ledger matches the simulator's own bill
within 1 %.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import AgentConfig, PendingApproval, PollRequest
from fleet_agent.store import SpendLedger, Store
from simulator import SimServer
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from testkit.sim_helpers import steady_sim
from tests.helpers import eventually, json_rows, running_worker, status, tool_request
from workflows import FleetAgentWorkflow

START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
NOOP = 'Nothing to do.\n<verdict>{"action": false, "state_changed": false}</verdict>'
DONE = 'Done.\n<verdict>{"action": true, "state_changed": true}</verdict>'
Agent = WorkflowHandle[FleetAgentWorkflow, None]


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with steady_sim(31, START) as server:
        yield server


class Spender:
    """The scripted model: on `PHASE:<name>` from the operator it plays that
    phase's tool calls, one per round, whatever the results say; any other
    run is a no-op. The step is read from the conversation (retries safe)."""

    def __init__(self) -> None:
        self.plans: dict[str, list[tuple[str, dict[str, Any]]]] = {}

    def __call__(self, req: Request) -> Reply:
        messages = req.messages
        start = len(messages) - 1
        while start > 0 and _only_tool_results(messages[start]):
            start -= 2  # back over (assistant tool_use, user tool_result) pairs
        opening = json.dumps(messages[start].get("content"))
        phase = next((p for p in self.plans if f"PHASE:{p}" in opening), None)
        if phase is None:
            return Reply(text=NOOP)
        step = (len(messages) - 1 - start) // 2
        plan = self.plans[phase]
        if step < len(plan):
            return Reply(tool_calls=[plan[step]])
        return Reply(text=DONE)


def _only_tool_results(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return (
        message.get("role") == "user"
        and isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    )


def _told(fake: FakeAnthropic, tool: str) -> list[str]:
    """Every result of `tool` the model read, in order (each once)."""
    seen: dict[str, str] = {}
    for req in fake.requests:
        uses: dict[str, str] = {}
        for message in req.messages:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    uses[str(block.get("id"))] = str(block.get("name"))
                elif (
                    block.get("type") == "tool_result"
                    and uses.get(str(block.get("tool_use_id"))) == tool
                ):
                    body = block.get("content")
                    text = (
                        "".join(str(c.get("text", "")) for c in body)
                        if isinstance(body, list)
                        else str(body)
                    )
                    seen.setdefault(str(block.get("tool_use_id")), text)
    return list(seen.values())


def _creates(offer_id: int) -> tuple[str, dict[str, Any]]:
    return ("create_instance", {"offer_id": offer_id, "reason": "the operator said so"})


async def _phase(handle: Agent, name: str, done: int) -> None:
    """Send the operator's order and wait for its run to end."""
    await handle.signal(FleetAgentWorkflow.human_message, {"text": f"PHASE:{name} now"})

    async def ended() -> bool:
        st = await status(handle)
        return st.last_run is not None and st.run_count > done and st.current_run is None

    await eventually(ended, timeout=60, what=f"the {name} run to end")


async def test_the_model_cannot_overspend_and_the_ledger_matches_the_bill(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
) -> None:
    found = await ActivityEnvironment().run(
        fleet.search_offers, tool_request("probe", "search_offers", {"limit": 4})
    )
    offers = json_rows(found.content)
    dph = [float(o["dph"]) for o in offers]
    # A day of two cheap machines fits the budget; a day of a third does not
    # (the budget bounds any 24 hours: half a day of it is all that is left).
    budget = (dph[0] + dph[1]) * 24 + dph[2] * 12
    # The approval threshold sits just above what the cheap machines cost.
    threshold = round(max(dph) * 1.05, 2)
    spender = Spender()
    spender.plans = {
        "budget": [
            ("search_offers", {"limit": 4}),
            *(_creates(o["offer_id"]) for o in offers[:3]),
        ],
        "rate": [_creates(offers[2]["offer_id"]), _creates(offers[3]["offer_id"])],
        "dear": [
            ("search_offers", {"gpu_name": "H100", "limit": 20}),
        ],
    }
    fake_llm.set_responder(spender)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle: Agent = await h.start_agent(
            target_proofs_per_hour=2_000,
            monitor_poll_seconds=60,
            daily_budget_usd=round(budget, 2),
            max_creates_per_hour=3,
            max_instance_dph=40,
            max_fleet_dph=100,
            approval_mode="threshold",
            approval_above_dph=threshold,
            approval_above_fleet_dph_increase=100,
        )
        agent_id = handle.id
        await eventually(lambda: _idle(handle), timeout=60, what="the agent's first run to end")
        runs = (await status(handle)).run_count

        # 1. Past the daily budget: two rented, the third refused with the figures.
        await _phase(handle, "budget", runs)
        told = _told(fake_llm, "create_instance")
        assert [t.startswith("Rented") or "Rented" in t for t in told] == [True, True, False]
        assert "Refused by the daily budget" in told[2] and "Nothing was rented" in told[2]
        assert f"daily_budget_usd=${round(budget, 2):.2f}" in told[2]
        assert _ours(sim, agent_id) == 2

        # 2. Past the create rate: the budget raised, the third of the hour
        #    is rented, the fourth refused.
        await handle.execute_update(FleetAgentWorkflow.update_config, {"daily_budget_usd": 5_000})
        runs = (await status(handle)).run_count
        await _phase(handle, "rate", runs)
        told = _told(fake_llm, "create_instance")[3:]
        assert "Rented" in told[0], told
        assert "max_creates_per_hour=3" in told[1] and "Nothing was rented" in told[1]
        assert _ours(sim, agent_id) == 3

        # 3. Far above the approval threshold: it waits, the operator denies.
        h100s = json_rows(
            (
                await ActivityEnvironment().run(
                    fleet.search_offers,
                    tool_request(
                        "probe",
                        "search_offers",
                        {"gpu_name": "H100", "limit": 20},
                        AgentConfig(max_instance_dph=40, max_fleet_dph=100),
                    ),
                )
            ).content
        )
        dear = max(h100s, key=lambda o: float(o["dph"]))
        assert float(dear["dph"]) > 2 * threshold, (dear, threshold)
        spender.plans["dear"].append(_creates(dear["offer_id"]))
        await handle.execute_update(FleetAgentWorkflow.update_config, {"max_creates_per_hour": 100})
        await handle.signal(FleetAgentWorkflow.human_message, {"text": "PHASE:dear now"})

        async def asked() -> PendingApproval | None:
            st = await status(handle)
            return st.pending_approvals[0] if st.pending_approvals else None

        pending = await eventually(asked, timeout=60, what="the approval of the H100")
        assert pending is not None and pending.dph == pytest.approx(float(dear["dph"]))
        assert f"above approval_above_dph ${threshold:g}/h" in pending.reason
        await handle.execute_update(
            FleetAgentWorkflow.decide_approval,
            {"approval_id": pending.id, "approve": False, "note": "far too dear"},
        )
        await eventually(lambda: _idle(handle), timeout=60, what="the denied run to end")
        refused = _told(fake_llm, "create_instance")[-1]
        assert "denied by operator: far too dear" in refused and "Nothing was rented" in refused
        assert _ours(sim, agent_id) == 3

        # 4. Two hours pass under the monitor; the ledger keeps up with the bill.
        for _ in range(12):
            sim.market.advance(600)
            await ts_env.sleep(600)
        await ActivityEnvironment().run(fleet.poll_fleet, PollRequest(agent_id=agent_id))
        bill = sum(
            float(c["total_usd"])
            for c in sim.market.charges()["instances"]
            if agent_id in str(c["label"])
        )
        ledger = sum(i.usd for i in SpendLedger(store).instances(agent_id))
        assert bill > 1.0
        assert ledger == pytest.approx(bill, rel=0.01), (ledger, bill)
        assert _ours(sim, agent_id) == 3, "nothing rented past the rules afterwards either"


async def _idle(handle: Agent) -> bool:
    st = await status(handle)
    return st.current_run is None and st.run_count > 0 and not st.pending_triggers


def _ours(sim: SimServer, agent_id: str) -> int:
    return sum(1 for c in sim.market.charges()["instances"] if agent_id in str(c["label"]))
