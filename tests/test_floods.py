"""An operator's worst day, on the real dev server: floods of signals.

Each test attacks the agent as issue 6 reproduced it, then checks that the
agent is alive, answers `status` within 2 s, lost nothing it accepted and
refused the rest visibly, and that what it carries (the status answer, run
inputs) stays small.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import AgentStatus, RunStatus, TriggerKind
from fleet_agent.store import Store
from tests.fakes.anthropic_server import FakeAnthropic, Reply
from tests.helpers import eventually, running_worker, wait_runs
from workflows import FleetAgentWorkflow

ACTED = 'Done.\n<verdict>{"action": true, "state_changed": true}</verdict>'
SMALL = 256_000  # bytes: what RunInput, continue-as-new input and status must stay under
STATUS_DEADLINE = timedelta(seconds=2)

Agent = WorkflowHandle[FleetAgentWorkflow, None]


async def quick_status(handle: Agent) -> AgentStatus:
    """The status query, which must answer within 2 s whatever is going on."""
    return await handle.query(FleetAgentWorkflow.status, rpc_timeout=STATUS_DEADLINE)


async def wait_status(
    probe: Callable[[], Awaitable[AgentStatus | None]], *, timeout: float = 60, what: str
) -> AgentStatus:
    found = await eventually(probe, timeout=timeout, what=what)
    assert found is not None
    return found


def status_bytes(st: AgentStatus) -> int:
    return len(st.model_dump_json())


async def flood(n: int, send: Callable[[int], Awaitable[None]], *, batch: int = 100) -> None:
    for start in range(0, n, batch):
        await asyncio.gather(*(send(i) for i in range(start, min(n, start + batch))))


async def start_payload_sizes(client: Client, workflow_id: str) -> list[int]:
    """Bytes of the input of every execution of a workflow chain (start and CAN)."""
    sizes = []
    async for wf in client.list_workflows(f'WorkflowId = "{workflow_id}"'):
        history = await client.get_workflow_handle(workflow_id, run_id=wf.run_id).fetch_history()
        first = history.events[0]
        assert first.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
        payloads = first.workflow_execution_started_event_attributes.input.payloads
        sizes.append(sum(len(p.data) for p in payloads))
    return sizes


async def test_huge_messages_are_refused_and_history_stays_small(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """40 messages of 1.5 MB: refused by size, yet the loop continues as new
    often enough that the history never nears Temporal's 50 MB limit."""
    async with running_worker(dev_env.client, store) as h:
        handle = await h.start_agent(paused=True)
        blob = "x" * 1_500_000
        for _ in range(40):
            await handle.signal(FleetAgentWorkflow.human_message, {"text": blob})
        st = await wait_status(
            lambda: _rejected_at_least(handle, 40), timeout=60, what="40 refusals"
        )
        assert st.rejected_total == 40
        assert "20000" in st.rejected[-1].error
        assert st.executions >= 8, "continued as new every few MB"
        assert st.history_bytes < 8_000_000
        described = await handle.describe()
        assert described.status == WorkflowExecutionStatus.RUNNING
        assert status_bytes(st) < SMALL


async def _rejected_at_least(handle: Agent, n: int) -> AgentStatus | None:
    st = await quick_status(handle)
    return st if st.rejected_total >= n else None


async def test_state_change_storm_in_one_window_is_coalesced(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """3,000 state changes on 200 instances inside one long P1 window: O(1)
    handlers (no deadlock), continue-as-new by signal count, one trigger per
    instance, and the run that follows accounts for every change."""
    fake_llm.set_responder(lambda req: Reply(text=ACTED))
    async with running_worker(dev_env.client, store) as h:
        handle = await h.start_agent(p1_debounce_seconds=3600, heartbeat_seconds=86_400)
        n = 3_000

        async def send(i: int) -> None:
            await handle.signal(
                FleetAgentWorkflow.state_changed,
                {"instance_id": str(i % 200), "old_state": "loading", "new_state": f"s{i}"},
            )

        await flood(n, send)
        st = await wait_status(
            lambda: _pending_changes_at_least(handle, n), timeout=60, what="all changes pending"
        )
        assert len(st.pending_triggers) <= 201  # 200 instances + the start trigger
        assert st.rejected_total == 0
        assert st.executions >= 2, "continued as new by signal count"
        assert status_bytes(st) < SMALL
        await handle.signal(FleetAgentWorkflow.trigger_now, "storm over")
        runs = await wait_runs(store, handle.id, 1, timeout=60)
        changes = [t for r in runs for t in r.triggers if t.kind == TriggerKind.STATE_CHANGED]
        assert sum(t.count for t in changes) == n
        assert len({t.instance_id for t in changes}) == 200
        sizes = await start_payload_sizes(dev_env.client, f"{handle.id}/run-{runs[0].run}")
        assert sizes and max(sizes) < SMALL


async def _pending_changes_at_least(handle: Agent, n: int) -> AgentStatus | None:
    st = await quick_status(handle)
    got = sum(t.count for t in st.pending_triggers if t.kind == TriggerKind.STATE_CHANGED)
    return st if got >= n else None


async def test_500_long_messages_while_paused_are_all_kept(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """500 messages of 20,000 characters while paused: every one kept (texts in
    the store, previews in the workflow), small inputs, all answered by one run."""
    fake_llm.set_responder(lambda req: Reply(text=ACTED))
    async with running_worker(dev_env.client, store) as h:
        handle = await h.start_agent(paused=True)
        n = 500

        async def send(i: int) -> None:
            text = f"msg-{i:04d} " + "y" * 19_990
            await handle.signal(FleetAgentWorkflow.human_message, {"text": text, "author": "op"})

        await flood(n, send, batch=25)
        st = await wait_status(
            lambda: _messages_stored(handle, n), timeout=120, what="500 messages kept and stored"
        )
        assert st.rejected_total == 0
        assert status_bytes(st) < SMALL
        agent_inputs = await start_payload_sizes(dev_env.client, handle.id)
        assert max(agent_inputs) < SMALL, agent_inputs
        await handle.execute_update(FleetAgentWorkflow.update_config, {"paused": False})
        runs = await wait_runs(store, handle.id, 1, timeout=120)
        messages = [t for r in runs for t in r.triggers if t.kind == TriggerKind.HUMAN_MESSAGE]
        assert sorted(t.text[:8] for t in messages) == [f"msg-{i:04d}" for i in range(n)]
        assert all(len(t.text) == 20_000 for t in messages), "the run log has full texts"
        assert runs[0].status == RunStatus.OK
        sizes = await start_payload_sizes(dev_env.client, f"{handle.id}/run-{runs[0].run}")
        assert max(sizes) < SMALL, sizes
        prompt = fake_llm.requests[-1].all_text()
        assert "msg-0499 " + "y" * 100 in prompt


async def _messages_stored(handle: Agent, n: int) -> AgentStatus | None:
    st = await quick_status(handle)
    messages = [t for t in st.pending_triggers if t.kind == TriggerKind.HUMAN_MESSAGE]
    stored = all(len(t.text) <= 100 for t in messages)
    return st if len(messages) >= n and stored else None


async def test_a_flood_during_a_run_hands_the_run_over(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """Enough signals during one slow run to force a continue-as-new mid-run:
    the run goes on, the next execution takes in its result, nothing overlaps."""
    fake_llm.set_responder(lambda req: Reply(text=ACTED, delay=8.0))
    async with running_worker(dev_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2)
        await handle.signal(FleetAgentWorkflow.human_message, "first")

        async def running() -> bool:
            return (await quick_status(handle)).current_run == 1

        await eventually(running, timeout=30, what="run 1 to start")

        async def send(i: int) -> None:
            await handle.signal(
                FleetAgentWorkflow.state_changed,
                {"instance_id": str(i % 50), "new_state": "running"},
            )

        await flood(2_100, send)
        st = await quick_status(handle)
        assert st.executions >= 2 and st.current_run == 1, "continued as new mid-run"
        runs = await wait_runs(store, handle.id, 2, timeout=90)
        assert [r.run for r in runs[:2]] == [1, 2]
        assert runs[0].ended_at is not None and runs[0].ended_at <= runs[1].started_at
        assert (
            sum(t.count for t in runs[1].triggers if t.kind == TriggerKind.STATE_CHANGED) == 2_100
        )
        after = await quick_status(handle)
        assert after.last_run is not None and after.last_run.run >= 1
        assert fake_llm.max_concurrent == 1


async def test_unknown_signal_names_are_recorded(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    async with running_worker(dev_env.client, store) as h:
        handle = await h.start_agent(paused=True)
        await handle.signal("no_such_signal", {"text": "hello there"})
        await handle.signal("human_mesage", "typo in the name")
        st = await wait_status(lambda: _rejected_at_least(handle, 2), what="two refusals")
        assert [r.signal for r in st.rejected] == ["no_such_signal", "human_mesage"]
        assert "unknown signal" in st.rejected[0].error
        assert st.rejected[0].preview == "hello there"
        assert st.rejected[1].preview == "typo in the name"
