"""A worker SIGKILLed in the middle of a run's second LLM round: the round is
asked again by the next worker, with the first round's thinking sent back
exactly as the model wrote it (the fake Messages API answers a 400, which is
permanent, to anything else), and the run ends well. Real dev server, real
`python worker.py` processes, the simulator over HTTP and the thinking fake
driven by the real anthropic client."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from fleet_agent.llm.transcript import StoredReply, settled
from fleet_agent.models import AgentInput, ConfigPatch, RunStatus
from fleet_agent.store import Store
from simulator import SimServer
from testkit.fakes import FakeAnthropic, Reply, Request
from tests.helpers import eventually, worker_process_env
from tests.helpers.worker_process import Worker
from workflows import FleetAgentWorkflow
from workflows.policies import TASK_QUEUE

pytestmark = pytest.mark.devserver

DONE = 'Both calls made.\n<verdict>{"action": false, "state_changed": true}</verdict>'


class TwoRounds:
    """Round 1: look at the fleet. Round 2: hang the first time it is asked
    (the worker dies meanwhile), then look at the offers. Round 3: answer."""

    def __init__(self) -> None:
        self.hanging = threading.Event()
        self.round_2_asked = 0

    def __call__(self, req: Request) -> Reply:
        rnd = 1 + sum(1 for m in req.messages if m.get("role") == "assistant")
        if rnd == 1:
            return Reply(text="Looking.", tool_calls=[("get_fleet_status", {})])
        if rnd == 2:
            self.round_2_asked += 1
            if self.round_2_asked == 1:
                self.hanging.set()
                return Reply(text="never sent", delay=120)
            return Reply(text="Offers next.", tool_calls=[("search_offers", {"limit": 2})])
        return Reply(text=DONE)


async def test_a_worker_killed_in_round_two_resumes_with_the_thinking_intact(
    dev_env: WorkflowEnvironment, fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    script = TwoRounds()
    fake_llm.set_responder(script)
    db_url = f"sqlite:///{tmp_path / 'fleet.db'}"
    agent_id = f"thinking-restart-{uuid.uuid4().hex[:6]}"
    with (
        SimServer(seed=3, speed=0, scenario="ideal", offers=200, rate_limits=False) as sim,
        (tmp_path / "workers.log").open("ab") as log,
    ):
        env = worker_process_env(
            dev_env,
            db_url,
            FLEET_NEW_STORE="1",
            FLEET_LLM_PROVIDER="anthropic",
            VAST_API_KEY=sim.api_key,
            VAST_API_URL=sim.url,
            **fake_llm.env(),
        )
        workers = [Worker(env, log)]
        try:
            await dev_env.client.start_workflow(
                FleetAgentWorkflow.run,
                AgentInput(config=ConfigPatch(monitor_enabled=False, heartbeat_seconds=3600)),
                id=agent_id,
                task_queue=TASK_QUEUE,
            )

            async def hanging() -> bool:
                return script.hanging.is_set()

            await eventually(hanging, timeout=60, what="round 2 to be asked")
            workers[0].kill()
            workers.append(Worker(env, log))
            store = Store(db_url)
            try:

                async def recorded() -> Any:
                    runs = store.run_reads.list_runs(agent_id, limit=5)
                    return runs[0] if runs and runs[0].status != RunStatus.RUNNING else None

                run = await eventually(recorded, timeout=120, what="the run to end")
                assert run.status == RunStatus.OK, run.error
                # record_run closes the record first and settles the replies
                # after it: read them once the run's workflow has ended.
                run_handle = dev_env.client.get_workflow_handle(f"{agent_id}/run-1")
                await asyncio.wait_for(run_handle.result(), timeout=60)
                replies = [
                    StoredReply.model_validate_json(m.content).content
                    for m in store.messages.run_messages(agent_id, 1)
                    if m.kind == "assistant"
                ]
            finally:
                store.dispose()
        finally:
            with contextlib.suppress(Exception):
                await dev_env.client.get_workflow_handle(agent_id).terminate("test finished")
            for worker in workers:
                worker.kill()

    assert script.round_2_asked == 2, "asked again by the second worker"
    round_1, round_2_lost, round_2, round_3 = fake_llm.requests
    # Every ask of round 2 and round 3 carries round 1's reply exactly as issued.
    issued = round_1.content
    assert issued is not None and issued[0]["type"] == "thinking" and issued[0]["signature"]
    for later in (round_2_lost, round_2, round_3):
        turns = [m["content"] for m in later.plain_messages if m["role"] == "assistant"]
        assert turns[0] == issued
    assert round_2.content is not None
    assert [m["content"] for m in round_3.plain_messages if m["role"] == "assistant"][1] == (
        round_2.content
    )
    # The finished run keeps them settled: readable, signatures dropped.
    kept = [StoredReply(content=c, stop_reason="x") for c in (issued, round_2.content)]
    assert replies[:2] == [(settled(r) or r).content for r in kept]
