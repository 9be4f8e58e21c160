"""An approval outlives its worker: a run asks, the worker process is SIGKILLed
while the run waits, a new worker process starts, the operator approves, and
the machine is rented exactly once. Real dev server, real worker processes
(`python worker.py`), the simulator over HTTP and the fake Messages API
driven by the real anthropic client."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import AgentInput, ApprovalOutcome, ConfigPatch, PendingApproval
from fleet_agent.store import Store, ToolJournal
from simulator import SimServer
from testkit.fakes import FakeAnthropic
from tests.helpers import eventually, status_or_none, worker_process_env
from tests.helpers.approvals import create_result, renter
from tests.helpers.worker_process import Worker
from workflows import FleetAgentWorkflow
from workflows.policies import TASK_QUEUE

pytestmark = pytest.mark.devserver


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(seed=5, speed=0, scenario="ideal", offers=500, rate_limits=False) as server:
        yield server


async def test_an_approval_survives_a_killed_worker_and_rents_once(
    dev_env: WorkflowEnvironment,
    sim: SimServer,
    fake_llm: FakeAnthropic,
    tmp_path: Path,
) -> None:
    fake_llm.set_responder(renter)
    db_url = f"sqlite:///{tmp_path / 'fleet.db'}"
    env = worker_process_env(
        dev_env,
        db_url,
        # Other tests' agents may run on this task queue of the shared server.
        FLEET_NEW_STORE="1",
        FLEET_LLM_PROVIDER="anthropic",
        VAST_API_KEY=sim.api_key,
        VAST_API_URL=sim.url,
        **fake_llm.env(),
    )
    agent_id = f"approval-restart-{uuid.uuid4().hex[:6]}"
    workers: list[Worker] = []
    with (tmp_path / "workers.log").open("ab") as log:
        try:
            workers.append(Worker(env, log))
            handle: WorkflowHandle[FleetAgentWorkflow, None] = await dev_env.client.start_workflow(
                FleetAgentWorkflow.run,
                AgentInput(
                    config=ConfigPatch(
                        target_proofs_per_hour=50,
                        monitor_enabled=False,
                        approval_mode="threshold",
                        approval_above_dph=0.01,
                    )
                ),
                id=agent_id,
                task_queue=TASK_QUEUE,
            )

            async def asked() -> PendingApproval | None:
                st = await status_or_none(handle)
                return st.pending_approvals[0] if st and st.pending_approvals else None

            pending = await eventually(asked, timeout=60, what="the approval to be asked")
            assert pending is not None
            workers[0].kill()
            workers.append(Worker(env, log))
            outcome: ApprovalOutcome = await handle.execute_update(
                FleetAgentWorkflow.decide_approval,
                {"approval_id": pending.id, "approve": True, "author": "dana"},
            )
            assert outcome.error == "", outcome

            async def ended() -> bool:
                st = await status_or_none(handle)
                return st is not None and st.last_run is not None and st.last_run.run >= pending.run

            await eventually(ended, timeout=90, what="the approved run to end")
            assert "Approved by dana" in create_result(fake_llm)
            labels = [
                str(i.get("label"))
                for i in sim.market.state()["instances"]
                if agent_id in str(i.get("label"))
            ]
            assert len(labels) == 1, labels
            assert int(sim.market.state()["counters"]["creates"]) == 1
            store = Store(db_url)
            try:
                record = ToolJournal(store).get(agent_id, pending.tool_use_id)
                assert record is not None and record.result is not None
                assert record.result.mutating
            finally:
                store.dispose()
        finally:
            with contextlib.suppress(Exception):
                await dev_env.client.get_workflow_handle(agent_id).terminate("test finished")
            for worker in workers:
                worker.kill()
