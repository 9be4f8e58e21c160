"""When runs start, at the workflow level: one run at a time however slow the
model, and the debounce windows as the store records them.

The time-skipping test server, a real worker, the real anthropic client and
the fake Messages API. Times asserted on are workflow time: each run's record
holds `workflow.now()` at its start and end, each trigger its arrival.

Time on the time-skipping server: it skips only while the client waits in
`env.sleep` (or for a workflow's result), and never while an activity is in
flight: the server holds its clock then, so an activity that waits in real
time takes that long in workflow time too (a 3 s activity under
`env.sleep(100)` took 3.0 s of workflow time). So a model that answers in 3 s
of real time is a run 3 s long in workflow time, whichever way the test
waits; and the tests that send signals as runs go wait only by polling
(`eventually`), so workflow time runs with real time and a signal's window
closes while the run it arrived during is still in flight.

The debounce tests skip the time between their signals (`env.sleep`). Their
lower bounds are the windows themselves; their upper bounds are the other
window or a trigger's own, never a real-time margin: starting the child run
costs real time, which a loaded machine stretches.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import TriggerKind
from fleet_agent.store import RunRecord, Store
from testkit.fakes.anthropic_server import FakeAnthropic, Reply
from tests.helpers import (
    assert_sequential,
    eventually,
    finished_runs,
    running_worker,
    runs_that_waited,
    status,
    wait_runs,
)
from workflows import FleetAgentWorkflow

ACTED = 'Done.\n<verdict>{"action": true, "state_changed": true}</verdict>'
P0_WINDOW = timedelta(seconds=2)  # AgentConfig.p0_debounce_seconds, the default
# Each reply takes this long (real seconds = workflow seconds, see above):
# longer than the P0 window, so a message that arrives as a run's call starts
# is due while that call is still in flight.
SLOW_LLM = 3.0


async def test_runs_never_overlap_when_the_model_is_slower_than_the_p0_window(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """Messages keep arriving while each run waits for its slow model: the
    next run starts only when the current one has ended, and the fake
    Messages API never sees two calls at once."""
    fake_llm.set_responder(lambda req: Reply(text=ACTED, delay=SLOW_LLM))
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        sent = ["msg-0"]
        await handle.signal(FleetAgentWorkflow.human_message, sent[0])
        for k in range(1, 4):

            async def call_in_flight(k: int = k) -> bool:
                return len(fake_llm.requests) >= k and fake_llm.in_flight > 0

            await eventually(call_in_flight, what=f"run {k}'s model call in flight")
            # Two P0 triggers as the call starts: both due long before it ends.
            sent.append(f"msg-{k}")
            await handle.signal(FleetAgentWorkflow.human_message, sent[-1])
            await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": f"now-{k}"})

        async def all_answered() -> list[str]:
            runs = finished_runs(store, handle.id)
            texts = [t.text for r in runs for t in r.triggers if t.text.startswith("msg-")]
            return texts if len(texts) >= len(sent) else []

        answered = await eventually(all_answered, timeout=90, what="every message in a run")
        assert sorted(answered) == sorted(sent), "each message in exactly one run"
        runs = finished_runs(store, handle.id)
        # The premise, in each of the three runs after the first: a trigger
        # whose window closed while the run before was still in flight.
        waited = runs_that_waited(runs, P0_WINDOW)
        assert len(waited) >= 3, [(r.run, r.started_at, r.ended_at) for r in runs]
        assert_sequential(runs)
        assert fake_llm.max_concurrent == 1, "two model calls were in flight at once"


# A model slower than the agent's P1 window here: changes that arrive during
# a run are due before it ends, so runs that overlapped would show in the
# store's records and in the fake Messages API's max_concurrent. (On the
# time-skipping server an activity in flight holds the clock: the real
# seconds of the reply are workflow seconds, see above.)
BURST_P1_WINDOW = 1.0
BURST_LLM = 2.0


async def test_burst_of_state_changes_gives_few_runs_and_loses_nothing(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=ACTED, delay=BURST_LLM))
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(p1_debounce_seconds=BURST_P1_WINDOW)
        n = 1000

        async def send(i: int) -> None:
            await handle.signal(
                FleetAgentWorkflow.state_changed,
                {"instance_id": str(i % 37), "old_state": "loading", "new_state": "running"},
            )

        async def call_in_flight() -> bool:
            return fake_llm.in_flight > 0

        loop = asyncio.get_running_loop()
        began = loop.time()
        for chunk in range(0, n, 100):
            if chunk == n // 2:
                # The second half of the burst arrives while a run is in flight.
                await eventually(call_in_flight, what="a run's model call in flight")
            await asyncio.gather(*(send(i) for i in range(chunk, chunk + 100)))
        sending = loop.time() - began

        async def all_in_runs() -> list[RunRecord]:
            runs = finished_runs(store, handle.id)
            counted = sum(
                t.count for r in runs for t in r.triggers if t.kind == TriggerKind.STATE_CHANGED
            )
            return runs if counted >= n else []

        runs = await eventually(all_in_runs, timeout=90, what="every state change in a run")
        st = await status(handle)
        assert st.pending_triggers == []
        changes = [t for r in runs for t in r.triggers if t.kind == TriggerKind.STATE_CHANGED]
        # Changes of one instance coalesce while they wait: one trigger per
        # instance and run, counting every change it stands for.
        assert sum(t.count for t in changes) == n, "every state change reached some run"
        per_run = [[t.instance_id for t in r.triggers if t in changes] for r in runs]
        assert all(len(ids) == len(set(ids)) <= 37 for ids in per_run)
        firsts = [t.seq for t in changes]
        assert len(set(firsts)) == len(firsts), "no trigger is in two runs"
        # Few runs: one at a time, each as long as the model's reply, so while
        # the burst lasts a run starts at most every BURST_LLM seconds; one more
        # takes what arrived during the last.
        print(f"burst: {n} state changes in {sending:.1f}s -> {len(runs)} run(s)")
        assert 2 <= len(runs) <= sending // BURST_LLM + 2, [len(r.triggers) for r in runs]
        window = timedelta(seconds=BURST_P1_WINDOW)
        assert runs_that_waited(runs, window), "no change was due during a run: no test"
        assert_sequential(runs)
        assert fake_llm.max_concurrent == 1


# ------------------------------------------------------------ debounce windows

P1_WINDOW = timedelta(seconds=10)  # AgentConfig.p1_debounce_seconds, the default


async def test_a_p1_run_starts_10s_after_the_first_trigger_whatever_follows(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """The start (a P1 trigger) opens the window; state changes 4 s and 8 s
    into it join the run without moving it."""
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        for instance in ("7", "8"):
            await ts_env.sleep(4)  # workflow time, skipped
            await handle.signal(
                FleetAgentWorkflow.state_changed, {"instance_id": instance, "new_state": "loading"}
            )
        await ts_env.sleep(10)
        run = (await wait_runs(store, handle.id, 1))[0]
        kinds = sorted(t.kind for t in run.triggers)
        assert kinds == [TriggerKind.AGENT_STARTED] + [TriggerKind.STATE_CHANGED] * 2, kinds
        first = min(t.received_at for t in run.triggers)
        last = max(t.received_at for t in run.triggers)
        assert last - first >= timedelta(seconds=7), "the changes came well into the window"
        assert run.started_at - first >= P1_WINDOW, "not before the window closed"
        # Had the last change moved the window, the run would start 10 s after it.
        assert run.started_at < last + P1_WINDOW, (first, last, run.started_at)


async def test_a_p0_run_starts_no_sooner_than_2s_after_its_trigger(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """A human message half a second into a P1 window runs it at the P0
    window, 2 s after the message; a trigger_now alone, 2 s after it too.
    The upper bound is the P1 window: a P0 trigger never waits for it."""
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        await ts_env.sleep(11)  # the start-up run
        await wait_runs(store, handle.id, 1)
        await handle.signal(
            FleetAgentWorkflow.state_changed, {"instance_id": "7", "new_state": "loading"}
        )
        await ts_env.sleep(0.5)
        await handle.signal(FleetAgentWorkflow.human_message, "status please")
        await ts_env.sleep(3)
        run = (await wait_runs(store, handle.id, 2))[1]
        assert sorted(t.kind for t in run.triggers) == [
            TriggerKind.HUMAN_MESSAGE,
            TriggerKind.STATE_CHANGED,
        ]
        change = next(t for t in run.triggers if t.kind == TriggerKind.STATE_CHANGED)
        human = next(t for t in run.triggers if t.kind == TriggerKind.HUMAN_MESSAGE)
        assert human.received_at - change.received_at >= timedelta(seconds=0.5)
        assert run.started_at - human.received_at >= P0_WINDOW
        assert run.started_at < change.received_at + P1_WINDOW, "the P0 window shortened P1's"

        await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "look now"})
        await ts_env.sleep(3)
        run = (await wait_runs(store, handle.id, 3))[2]
        (now,) = run.triggers
        assert now.kind == TriggerKind.TRIGGER_NOW
        assert P0_WINDOW <= run.started_at - now.received_at < P1_WINDOW
