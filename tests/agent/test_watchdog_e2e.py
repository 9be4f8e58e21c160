"""The watchdog on the real dev server: a terminated agent comes back, a
cancelled one does not (issue 44, "never silent").

A real worker (fake Messages API), the CLI run in a thread as an operator
would run it, and the Temporal Schedule it creates, looking every 2 seconds
(`--watchdog-minutes` takes fractions for this).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import uuid
from collections import Counter
from datetime import timedelta
from functools import partial

import pytest
from temporalio.client import (
    Client,
    ScheduleActionExecutionStartWorkflow,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import AgentStatus
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import AgentConfigs, RunRecord, Store
from starter.cli import main
from starter.watchdog_schedule import ensure_watchdog, watchdog_id, watchdog_offset
from testkit.agents import Harness
from testkit.fakes.anthropic_server import FakeAnthropic, Reply
from testkit.notify_receivers import WebhookReceiver
from tests.helpers import eventually, finished_runs, running_worker, status_or_none
from workflows import FleetAgentWorkflow

ACTED = 'Done.\n<verdict>{"action": true, "state_changed": true}</verdict>'
EVERY = "0.034"  # minutes: a look every 2 s


async def cli(h: Harness, client: Client, *argv: str) -> int:
    """The CLI in a thread (it owns an event loop), aimed at the test's worker."""
    address = client.service_client.config.target_host
    return await asyncio.to_thread(
        main, [*argv, "--address", address, "--task-queue", h.task_queue]
    )


async def start(h: Harness, client: Client, agent_id: str) -> None:
    code = await cli(
        h,
        client,
        "start",
        "--agent-id",
        agent_id,
        "--watchdog-minutes",
        EVERY,
        "--set",
        "monitor_enabled=false",
        "--set",
        "p0_debounce_seconds=0.2",
    )
    assert code == 0
    h.agent_ids.add(agent_id)


async def schedule_exists(client: Client, agent_id: str) -> bool:
    try:
        await client.get_schedule_handle(watchdog_id(agent_id)).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


async def delete_schedule(client: Client, agent_id: str) -> None:
    if await schedule_exists(client, agent_id):
        await client.get_schedule_handle(watchdog_id(agent_id)).delete()


async def test_terminated_agent_comes_back_with_its_numbering_config_and_how_it_ended(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=ACTED))
    client = dev_env.client
    agent_id = f"wd-{uuid.uuid4().hex[:8]}"
    with WebhookReceiver() as hook:
        notify = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url()})
        async with running_worker(client, store, notify=notify) as h:
            try:
                st, runs, told = await _terminate_and_come_back(h, client, store, hook, agent_id)
            finally:
                await delete_schedule(client, agent_id)
    assert st.restarted is not None
    assert st.restarted.started_by == "watchdog"
    assert st.restarted.previous.status == "terminated"
    assert st.restarted.previous.reason == "operator slip"
    assert st.restarted.config_restored
    assert st.config.target_proofs_per_hour == 3.5, "last known config, from the store"
    assert st.config.monitor_enabled is False
    assert runs[-1].run == runs[0].run + 1, "run numbering continues"
    prompt = fake_llm.requests[-1].all_text()
    assert "restarted by the watchdog; it had ended: terminated" in prompt
    assert "terminated (reason: operator slip)" in told, told
    assert f"Runs continue from #{runs[-1].run}" in told, told


async def _terminate_and_come_back(
    h: Harness, client: Client, store: Store, hook: WebhookReceiver, agent_id: str
) -> tuple[AgentStatus, list[RunRecord], str]:
    """Start the agent, change its config, terminate it; once the watchdog has
    brought it back: its status, its runs (the restart's included) and the
    notification that said so."""
    await start(h, client, agent_id)
    handle = client.get_workflow_handle_for(FleetAgentWorkflow.run, agent_id)
    first = (await handle.describe()).run_id
    await handle.execute_update(FleetAgentWorkflow.update_config, {"target_proofs_per_hour": 3.5})
    await handle.signal(FleetAgentWorkflow.human_message, "before the terminate")
    await eventually(lambda: _runs(store, agent_id, 1), what="run 1")

    async def kept() -> bool:
        config = AgentConfigs(store).load(agent_id)
        return config is not None and config.target_proofs_per_hour == 3.5

    await eventually(kept, what="the changed config kept in the store")
    await client.get_workflow_handle(agent_id).terminate(reason="operator slip")

    async def back() -> AgentStatus | None:
        desc = await handle.describe()
        if desc.run_id == first or desc.status != WorkflowExecutionStatus.RUNNING:
            return None
        st = await status_or_none(handle)
        # Queries are answered at once: wait until the recall is done.
        return st if st is not None and st.restarted is not None else None

    st = await eventually(back, timeout=20.0, what="the agent back, by the watchdog")
    assert st is not None
    runs = await eventually(lambda: _runs(store, agent_id, 2), what="the restart's run")

    async def told() -> list[str]:
        texts = [str(p.body) for p in hook.posts]
        return [t for t in texts if "restarted by the watchdog" in t]

    (text,) = await eventually(told, what="the restart's notification")
    return st, runs, text


async def test_cancel_deletes_the_watchdog_first_and_nothing_restarts_the_agent(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=ACTED))
    client = dev_env.client
    agent_id = f"wd-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, store) as h:
        try:
            await start(h, client, agent_id)
            described = await client.get_schedule_handle(watchdog_id(agent_id)).describe()
            note = described.schedule.state.note or ""
            assert f"fleet-agent cancel --agent-id {agent_id}" in note, note
            memo = await described.memo()
            assert memo["stop"].endswith(f"cancel --agent-id {agent_id}"), memo
            # A look that finds the agent running leaves it alone.
            handle = client.get_workflow_handle_for(FleetAgentWorkflow.run, agent_id)
            first = (await handle.describe()).run_id
            schedule = client.get_schedule_handle(watchdog_id(agent_id))
            await schedule.trigger()

            async def looked() -> int:
                return (await schedule.describe()).info.num_actions

            await eventually(looked, what="a look by the watchdog")
            assert await cli(h, client, "cancel", "--agent-id", agent_id, "--yes") == 0
            assert not await schedule_exists(client, agent_id)
            desc = await handle.describe()
            assert desc.run_id == first, "the running agent was untouched by the look"
            assert desc.status == WorkflowExecutionStatus.CANCELED
            # The schedule looked every 2 s: 5 looks' worth of time, and nothing came back.
            ended = asyncio.get_running_loop().time() + 10.0
            while asyncio.get_running_loop().time() < ended:
                desc = await handle.describe()
                assert (desc.run_id, desc.status) == (first, WorkflowExecutionStatus.CANCELED)
                await asyncio.sleep(0.5)
        finally:
            await delete_schedule(client, agent_id)


def test_cancel_without_a_terminal_or_yes_refuses_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    # No server at this address: the refusal comes before any connection.
    assert main(["cancel", "--agent-id", "a1", "--address", "127.0.0.1:9"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "confirm with --yes" in err[0], err


async def _runs(store: Store, agent_id: str, n: int) -> list[RunRecord]:
    runs = finished_runs(store, agent_id)
    return list(runs) if len(runs) >= n else []


async def test_cancel_with_a_run_in_flight_lets_the_run_finish_and_record_itself(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=ACTED))
    fake_llm.latency = 2.0  # real seconds: the run is in its LLM call when cancel comes
    client = dev_env.client
    agent_id = f"wd-{uuid.uuid4().hex[:8]}"
    async with running_worker(client, store) as h:
        try:
            await start(h, client, agent_id)
            handle = client.get_workflow_handle_for(FleetAgentWorkflow.run, agent_id)
            await handle.signal(FleetAgentWorkflow.human_message, "one last thing")
            await eventually(lambda: _llm_in_flight(fake_llm), what="the LLM call in flight")
            assert await cli(h, client, "cancel", "--agent-id", agent_id, "--yes") == 0
            assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
            runs = await eventually(lambda: _runs(store, agent_id, 1), what="the run recorded")
            assert runs[0].status.value == "ok", runs[0]
        finally:
            await delete_schedule(client, agent_id)


async def _llm_in_flight(fake: FakeAnthropic) -> bool:
    return fake.in_flight > 0


async def test_cancel_ends_the_looks_in_flight_of_its_agent_only(
    dev_env: WorkflowEnvironment, capsys: pytest.CaptureFixture[str]
) -> None:
    # No worker on this task queue: a look the schedule starts waits there,
    # running, as it would while the worker is down.
    client = dev_env.client
    queue = f"no-worker-{uuid.uuid4().hex[:8]}"
    agent_id = f"wd-{uuid.uuid4().hex[:8]}"
    neighbour = f"{agent_id}-x"  # its looks' IDs start with agent_id's prefix
    try:
        for each in (agent_id, neighbour):
            await ensure_watchdog(client, each, queue, timedelta(hours=1))
            await client.get_schedule_handle(watchdog_id(each)).trigger()
        looks: dict[str, str] = {}
        for each in (agent_id, neighbour):
            look = await eventually(partial(_look, client, each), what=f"{each}'s look")
            assert look is not None
            looks[each] = look
        argv = ["cancel", "--agent-id", agent_id, "--yes", "--task-queue", queue]
        address = client.service_client.config.target_host
        assert await asyncio.to_thread(main, [*argv, "--address", address]) == 0
        ended = await client.get_workflow_handle(looks[agent_id]).describe()
        assert ended.status == WorkflowExecutionStatus.TERMINATED
        kept = await client.get_workflow_handle(looks[neighbour]).describe()
        assert kept.status == WorkflowExecutionStatus.RUNNING
    finally:
        for each in (agent_id, neighbour):
            await delete_schedule(client, each)
            query = f'WorkflowId STARTS_WITH "{watchdog_id(each)}-"'
            async for wf in client.list_workflows(query):
                with contextlib.suppress(RPCError):
                    await client.get_workflow_handle(wf.id).terminate(reason="test done")


async def _look(client: Client, agent_id: str) -> str | None:
    """The ID of the look this agent's schedule started, once visibility
    lists it running (as `cancel` finds looks)."""
    schedule = await client.get_schedule_handle(watchdog_id(agent_id)).describe()
    for action in schedule.info.running_actions:
        if not isinstance(action, ScheduleActionExecutionStartWorkflow):
            continue
        query = f'WorkflowId = "{action.workflow_id}" AND ExecutionStatus = "Running"'
        async for _ in client.list_workflows(query):
            return action.workflow_id
    return None


def test_the_looks_of_many_agents_are_spread_over_the_interval() -> None:
    every = timedelta(minutes=5)
    offsets = [watchdog_offset(f"fleet-{i:03d}", every) for i in range(101)]
    assert all(timedelta(0) <= o < every and o.microseconds == 0 for o in offsets)
    # Aligned, all 101 looked in the same second; spread by a hash, about 3
    # fall in each 10 s of the interval (9 at most, for these IDs).
    per_bucket = Counter(int(o.total_seconds()) // 10 for o in offsets)
    assert len(per_bucket) == 30 and max(per_bucket.values()) <= 10, per_bucket
    assert watchdog_offset("fleet-000", every) == offsets[0]  # stable across processes


async def test_each_agents_schedule_looks_at_its_own_offset(dev_env: WorkflowEnvironment) -> None:
    client = dev_env.client
    queue = f"no-worker-{uuid.uuid4().hex[:8]}"
    agents = [f"wd-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    every = timedelta(hours=1)
    try:
        nexts = []
        for agent_id in agents:
            await ensure_watchdog(client, agent_id, queue, every)
            described = await client.get_schedule_handle(watchdog_id(agent_id)).describe()
            (interval,) = described.schedule.spec.intervals
            assert interval.offset == watchdog_offset(agent_id, every)
            nexts.append(described.info.next_action_times[0])
        assert nexts[0] != nexts[1]
    finally:
        for agent_id in agents:
            await delete_schedule(client, agent_id)
