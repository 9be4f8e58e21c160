"""End to end on the real Temporal dev server: a real worker, real signals.

The dev server fixture lowers `limit.historyCount.suggestContinueAsNew`
(tests/conftest.py), so the agent continues as new every few runs here; these
tests prove nothing is lost across it.
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.exc import OperationalError
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.models import RunStatus, TriggerKind
from fleet_agent.store import RunRecord, Store
from fleet_agent.store.run_writes import RunWrites
from simulator import SimServer
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import (
    assert_sequential,
    eventually,
    finished_runs,
    running_worker,
    runs_that_waited,
    status,
)
from workflows import FleetAgentWorkflow

ACTED = 'Done.\n<verdict>{"action": true, "state_changed": true}</verdict>'


# The agent's debounce windows in the forced continue-as-new test, and a reply
# slower than both: a trigger that arrives as a run's call starts is due
# before the call ends, so runs that overlapped would show in the store's
# records and in the fake Messages API's max_concurrent.
P0_WINDOW, P1_WINDOW = 0.3, 1.0
SLOW_LLM = 1.5


def _planner(req: Request) -> Reply:
    """Schedules a far wake when asked to 'plan', otherwise answers (slowly)."""
    reply = _plan(req)
    reply.delay = SLOW_LLM
    return reply


def _plan(req: Request) -> Reply:
    if req.tool_results():
        return Reply(text=ACTED)
    text = req.last_user_text()
    if "plan-" in text:
        tag = text.split("plan-")[1].split()[0]
        return Reply(
            tool_calls=[
                (
                    "schedule_next_check",
                    {"delay_seconds": 7200 + 100 * int(tag), "reason": f"plan-{tag}"},
                )
            ]
        )
    return Reply(text=ACTED)


async def test_forced_continue_as_new_loses_no_trigger_or_wake(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(_planner)
    rng = random.Random(7)
    async with running_worker(dev_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=P0_WINDOW, p1_debounce_seconds=P1_WINDOW)
        sent: list[str] = []
        for i in range(60):
            kind = rng.choice(["human", "human", "state", "state", "now"])
            uid = f"u{i}"
            if i % 15 == 0:
                await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": f"plan-{i // 15}"})
                uid = f"plan-{i // 15}"
            elif kind == "human":
                await handle.signal(FleetAgentWorkflow.human_message, {"text": uid})
            elif kind == "state":
                await handle.signal(
                    FleetAgentWorkflow.state_changed,
                    {"instance_id": uid, "new_state": "running"},
                )
            else:
                await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": uid})
            sent.append(uid)
            await asyncio.sleep(rng.uniform(0.05, 0.4))

        async def settled() -> bool:
            st = await status(handle)
            return not st.pending_triggers and st.current_run is None and st.executions >= 3

        await eventually(settled, timeout=90, what="all triggers handled across executions")
        runs = finished_runs(store, handle.id)
        seen: list[str] = []
        for run in runs:
            for t in run.triggers:
                if t.kind == TriggerKind.HUMAN_MESSAGE:
                    seen.append(t.text)
                elif t.kind == TriggerKind.STATE_CHANGED:
                    seen.append(t.instance_id)
                elif t.kind == TriggerKind.TRIGGER_NOW:
                    seen.append(t.reason)
        assert sorted(seen) == sorted(sent), "each signal handled by exactly one run"
        assert [r.run for r in runs] == list(range(1, len(runs) + 1)), "no gap, no reuse"
        # Some trigger was due while the run before it was in flight: the
        # loop had to wait for a run, or the check below could not fail.
        assert runs_that_waited(runs, timedelta(seconds=P1_WINDOW))
        assert_sequential(runs)
        st = await status(handle)
        assert st.executions >= 3, "the server suggested continue-as-new several times"
        assert sorted(w.reason for w in st.wakes) == [f"plan-{i}" for i in range(4)]
        assert st.run_count == len(runs)
        assert fake_llm.max_concurrent == 1


async def test_reset_on_dev_server_then_agent_answers(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=f"ANSWER-{len(fake_llm.requests)}\n{ACTED[6:]}"))
    async with running_worker(dev_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2)
        # Tokens that occur nowhere else in a prompt: the check can fail.
        before, after = "msg-7f3c-before-reset", "msg-91ad-after-reset"
        await handle.signal(FleetAgentWorkflow.human_message, before)
        await eventually(lambda: _runs(store, handle.id, 1), what="first run")
        assert before in fake_llm.requests[-1].all_text()
        await handle.signal(FleetAgentWorkflow.reset_session, "operator reset")
        await handle.signal(FleetAgentWorkflow.human_message, after)
        runs = await eventually(lambda: _runs(store, handle.id, 2), what="run after reset")
        assert runs[-1].session == runs[0].session + 1
        assert runs[-1].run == runs[0].run + 1
        prompt = fake_llm.requests[-1].all_text()
        assert after in prompt and before not in prompt


async def _runs(store: Store, agent_id: str, n: int) -> list[RunRecord]:
    runs = finished_runs(store, agent_id)
    return list(runs) if len(runs) >= n else []


async def test_terminated_run_is_recorded_failed_and_the_loop_goes_on(
    dev_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    # (On the dev server: the time-skipping test server does not tell the
    # parent that its child was terminated.)
    fake_llm.latency = 3.0  # real seconds: time to terminate the run mid-call
    async with running_worker(dev_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2)
        await handle.signal(FleetAgentWorkflow.trigger_now, "slow one")
        await eventually(lambda: _llm_in_flight(fake_llm), what="the LLM call in flight")
        await dev_env.client.get_workflow_handle(f"{handle.id}/run-1").terminate("operator")
        runs = await eventually(lambda: _runs(store, handle.id, 1), what="run 1 closed")
        assert runs[0].status == RunStatus.FAILED
        assert "did not complete" in runs[0].error
        fake_llm.latency = 0.0
        await handle.signal(FleetAgentWorkflow.human_message, "and now?")
        runs = await eventually(lambda: _runs(store, handle.id, 2), what="run 2")
        assert runs[1].run == 2 and runs[1].status == RunStatus.OK
        assert "slow one" in fake_llm.requests[-1].all_text(), "the failed run stays in the prompt"


async def _llm_in_flight(fake: FakeAnthropic) -> bool:
    return fake.in_flight > 0


async def test_monitor_ends_when_its_agent_is_gone(
    dev_env: WorkflowEnvironment, store: Store, sim: SimServer, fleet: FleetActivities
) -> None:
    # (On the dev server: the time-skipping test server holds a signal to a
    # terminated workflow unanswered for half a minute.)
    async with running_worker(
        dev_env.client, store, provider=AutopilotProvider(), fleet=fleet
    ) as h:
        handle = await h.start_agent(
            target_proofs_per_hour=40, monitor_poll_seconds=5, p1_debounce_seconds=0.5
        )
        monitor = dev_env.client.get_workflow_handle(f"{handle.id}/monitor")

        async def rented() -> list[int]:
            return sim.market.instance_ids()

        ids = await eventually(rented, timeout=30, what="a rented machine")
        # The monitor's tasks wait behind the agent's and its runs' when the
        # worker falls behind (workflows/policies.py, MONITOR_PRIORITY).
        described = (await monitor.describe()).raw_description.workflow_execution_info
        assert described.priority.priority_key == 4
        agent = (await handle.describe()).raw_description.workflow_execution_info
        assert agent.priority.priority_key == 0  # the server's default, 3
        run = dev_env.client.get_workflow_handle(f"{handle.id}/run-1")
        assert (
            await run.describe()
        ).raw_description.workflow_execution_info.priority.priority_key == 0
        await handle.terminate("agent retired")
        sim.market.kill(ids[0], "exited")  # a change the monitor must report

        async def monitor_closed() -> bool:
            desc = await monitor.describe()
            return desc.status == WorkflowExecutionStatus.COMPLETED

        await eventually(monitor_closed, timeout=30, what="the monitor to end")
        assert (await monitor.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_monitor_of_a_steady_fleet_ends_within_a_poll_and_takes_config_at_once(
    dev_env: WorkflowEnvironment, store: Store, sim: SimServer, fleet: FleetActivities
) -> None:
    """Nothing changes in the fleet, so no signal would ever fail: the monitor
    still notices its agent is gone at its next poll. And a new poll interval
    applies at once, not after the old interval."""
    async with running_worker(
        dev_env.client, store, provider=AutopilotProvider(), fleet=fleet
    ) as h:
        handle = await h.start_agent(target_proofs_per_hour=0, monitor_poll_seconds=3600)
        monitor = dev_env.client.get_workflow_handle(f"{handle.id}/monitor")

        async def polls() -> int:
            try:
                history = await monitor.fetch_history()
            except RPCError:
                return 0  # the agent has not started its monitor yet
            return sum(
                1
                for e in history.events
                if e.activity_task_scheduled_event_attributes.activity_type.name == "poll_fleet"
            )

        first = await eventually(polls, timeout=30, what="the first poll")
        # With an hour between polls, a second poll within seconds proves the
        # new interval was taken at once.
        await handle.execute_update(FleetAgentWorkflow.update_config, {"monitor_poll_seconds": 5})
        await eventually(lambda: _more(polls, first), timeout=20, what="a poll at the new interval")
        before = await polls()
        await handle.terminate("agent retired")

        async def monitor_closed() -> bool:
            return (await monitor.describe()).status == WorkflowExecutionStatus.COMPLETED

        await eventually(monitor_closed, timeout=30, what="the monitor to end")
        # At its next poll (one more may have been under way at the terminate).
        assert await polls() <= before + 2, (before, await polls())
        assert sim.market.instance_ids() == [], "a steady, empty fleet: no signal was involved"


async def _more(probe: Any, than: int) -> bool:
    return bool(await probe() > than)


class _RunWritesThatGoAway(RunWrites):
    """Run writes whose records cannot be closed while `away` (an outage);
    `refused` counts the attempts it turned down."""

    away = False
    refused = 0

    def finish_run(self, *args: Any, **kwargs: Any) -> None:
        if self.away:
            self.refused += 1
            raise OperationalError("UPDATE fa_runs", {}, ConnectionError("the store is away"))
        super().finish_run(*args, **kwargs)


class _StoreThatGoesAway(Store):
    """A store whose run records cannot be closed while its `run_writes` are away."""

    run_writes: _RunWritesThatGoAway

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.run_writes = _RunWritesThatGoAway(self)


async def test_a_lost_run_is_closed_once_the_store_is_back(
    dev_env: WorkflowEnvironment, tmp_path: Path, fake_llm: FakeAnthropic
) -> None:
    """The run is terminated while the store cannot close records: the agent
    keeps trying (no attempt limit) and closes it when the store returns; the
    loop goes on meanwhile."""
    store = _StoreThatGoesAway(f"sqlite:///{tmp_path / 'fleet.db'}")
    store.create_all()
    fake_llm.latency = 3.0
    async with running_worker(dev_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2)
        await handle.signal(FleetAgentWorkflow.trigger_now, "slow one")
        await eventually(lambda: _llm_in_flight(fake_llm), what="the LLM call in flight")
        store.run_writes.away = True
        await dev_env.client.get_workflow_handle(f"{handle.id}/run-1").terminate("operator")

        # The 5 attempts (about 15 s) after which this used to give up: the
        # record is closed by a later one, once the store is back.
        async def five_refused() -> bool:
            return store.run_writes.refused >= 5

        await eventually(five_refused, timeout=60, what="five attempts to close run 1")
        assert store.run_reads.get_run(handle.id, 1).status == RunStatus.RUNNING  # type: ignore[union-attr]
        st = await status(handle)
        assert st.last_run is not None and st.last_run.status == RunStatus.FAILED
        store.run_writes.away = False
        fake_llm.latency = 0.0
        runs = await eventually(lambda: _runs(store, handle.id, 1), timeout=60, what="run 1 closed")
        assert store.run_writes.refused >= 5
        assert runs[0].status == RunStatus.FAILED and "did not complete" in runs[0].error
    store.dispose()
