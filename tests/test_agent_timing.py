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
waits; and the tests below that send signals as runs go wait only by polling
(`eventually`), so workflow time runs with real time and a signal's window
closes while the run it arrived during is still in flight.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from fleet_agent.store import Store
from tests.fakes.anthropic_server import FakeAnthropic, Reply
from tests.helpers import (
    assert_sequential,
    eventually,
    finished_runs,
    running_worker,
    runs_that_waited,
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
