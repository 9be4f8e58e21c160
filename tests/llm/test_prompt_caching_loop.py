"""Prompt caching through the whole loop: the agent and run workflows on the
time-skipping server, a real worker (fleet tools on the simulator) and the
real anthropic client talking to the fake Messages API, whose prompt cache
accounts like the real one."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.llm.transcript import StoredReply
from fleet_agent.store import Store
from testkit.fakes.anthropic_cache import cache_markers
from testkit.fakes.anthropic_server import FakeAnthropic
from tests.helpers import running_worker, wait_runs
from tests.helpers.prompt_caching import reported, respond
from workflows import FleetAgentWorkflow


async def test_rounds_and_runs_read_the_cache_and_each_round_records_the_apis_usage(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, fleet: FleetActivities
) -> None:
    fake_llm.set_responder(respond)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await h.start_agent(monitor_enabled=False)
        await ts_env.sleep(11)  # the start-up window
        await wait_runs(store, handle.id, 1)
        for n, text in ((2, "How is the fleet doing today?"), (3, "Any machine to release?")):
            await handle.signal(FleetAgentWorkflow.human_message, {"text": text})
            await wait_runs(store, handle.id, n)
    runs = await wait_runs(store, handle.id, 3)

    assert [len(cache_markers(r.body)) for r in fake_llm.requests] == [2, 2, 3, 3]
    first, second, run2, run3 = (reported(r) for r in fake_llm.requests)
    # Run 1, round 1: tools + system (with the fleet tools, over the 1,024-token
    # minimum by themselves) written for an hour, the run's context for 5 min.
    assert first.cache_read_input_tokens == 0
    assert first.cache_creation_1h_input_tokens >= 1_024
    # Round 2 reads everything round 1 wrote.
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    # Run 2 reads tools + system; run 3 also the history (run 1) that run 2 wrote.
    assert run2.cache_read_input_tokens == first.cache_creation_1h_input_tokens
    assert run3.cache_read_input_tokens == (
        run2.cache_read_input_tokens + run2.cache_creation_1h_input_tokens
    )
    assert run3.cache_read_input_tokens / run3.prompt_tokens > 0.7

    # Each round's usage, as stored with its reply, is what the API reported;
    # each run's record holds the sum of its rounds.
    per_round = {
        (m.run, m.round): StoredReply.model_validate_json(m.content).usage
        for run in runs
        for m in store.messages.run_messages(handle.id, run.run)
        if m.kind == "assistant"
    }
    assert per_round == {(1, 1): first, (1, 2): second, (2, 1): run2, (3, 1): run3}
    assert [r.usage for r in runs] == [first + second, run2, run3]
