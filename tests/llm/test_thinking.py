"""The default model thinks: runs against a Messages API that behaves like
Claude Sonnet 5.5 (testkit/fakes: adaptive thinking by default, signatures it
checks, a 400 for a tool-use cycle's thinking dropped, altered or
reordered, redacted_thinking now and then, thinking tokens by effort).

Time-skipping server, a real worker and the real anthropic client; the
summariser through its activity. The kill of a worker in the middle of a
round is in tests/llm/test_thinking_restart.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.compact import CompactActivities
from activities.fleet import FleetActivities
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.compaction import summary_body_cap
from fleet_agent.llm.request import THINKING_ROOM
from fleet_agent.llm.transcript import FOLD_HEADING, StoredReply, settled
from fleet_agent.models import CompactRequest, RunStatus
from fleet_agent.store import RunRecord, Store
from starter.views.runlog import run_detail
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import running_worker, wait_runs
from tests.helpers.compact import BUDGET as COMPACT_BUDGET
from tests.helpers.compact import add_run
from workflows import FleetAgentWorkflow

# A run that changed something stays in later prompts (a no-op would not).
DONE = 'The fleet is as it should be.\n<verdict>{"action": true, "state_changed": true}</verdict>'
SUMMARY = "I compare the fleet's capacity with the target before I search."


def settled_content(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reply = StoredReply(content=content, stop_reason="tool_use")
    return (settled(reply) or reply).content


def rounds_of(req: Request) -> int:
    return sum(1 for m in req.messages if m.get("role") == "assistant")


def looker(req: Request) -> Reply:
    """Round 1: two tool calls (the model's notes between them come back as a
    thinking block); round 2: the answer."""
    if not req.tool_results():
        return Reply(
            text="Checking.",
            tool_calls=[("get_fleet_status", {}), ("search_offers", {"limit": 3})],
            thinking=SUMMARY,
        )
    return Reply(text=DONE, thinking=SUMMARY)


async def one_run(
    env: WorkflowEnvironment, store: Store, fleet: FleetActivities | None, **config: Any
) -> RunRecord:
    async with running_worker(env.client, store, fleet=fleet) as h:
        handle = await h.start_agent(monitor_enabled=False, heartbeat_seconds=3600, **config)
        await env.sleep(11)
        runs = await wait_runs(store, handle.id, 1)
    return runs[0]


def assistant_turns(req: Request) -> list[list[dict[str, Any]]]:
    return [
        [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]
        for m in req.messages
        if m.get("role") == "assistant"
    ]


async def test_a_tool_using_run_sends_its_thinking_back_exactly(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, fleet: FleetActivities
) -> None:
    fake_llm.set_responder(looker)
    run = await one_run(ts_env, store, fleet)
    assert run.status == RunStatus.OK, run.error
    first, second = fake_llm.requests
    issued = first.content
    assert issued is not None
    kinds = [b["type"] for b in issued]
    # The lead, the text beside the calls (Sonnet 5.5), the note between them.
    assert kinds[0] == "thinking" and kinds.count("thinking") == 3, kinds
    assert kinds.index("tool_use") < kinds.index("thinking", 2), "notes between the calls"
    # Round 2 carries round 1's reply as it came: every block, in order.
    assert assistant_turns(second) == [issued]
    assert all(b["signature"] for b in issued if b["type"] == "thinking")
    # Once the run has its answer, its transcript keeps the blocks settled:
    # readable, without what only the API reads (and never sent again).
    stored = [
        StoredReply.model_validate_json(m.content).content
        for m in store.messages.run_messages(run.agent_id, run.run)
        if m.kind == "assistant"
    ]
    assert stored[0] == settled_content(issued)
    signature = issued[0]["signature"]
    assert stored[0][0] == {
        "type": "thinking",
        "thinking": SUMMARY,  # llm_thinking_display defaults to "summarized"
        "signature": "",
        "settled_chars": len(signature),
    }
    # Thinking is output, counted and paid for.
    thinking = sum(r.thinking_tokens or 0 for r in fake_llm.requests)
    assert thinking > 0 and run.usage.thinking_tokens == thinking
    assert run.usage.output_tokens == sum(r.usage["output_tokens"] for r in fake_llm.requests)  # type: ignore[index]


async def test_a_reply_with_redacted_thinking_goes_back_whole(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, fleet: FleetActivities
) -> None:
    fake_llm.thinking_registry.redacted_every = 1  # every thinking reply carries one
    fake_llm.set_responder(looker)
    run = await one_run(ts_env, store, fleet)
    assert run.status == RunStatus.OK, run.error
    issued = fake_llm.requests[0].content
    assert issued is not None and "redacted_thinking" in [b["type"] for b in issued]
    assert assistant_turns(fake_llm.requests[1]) == [issued]
    text = run_detail(run, store.messages.run_messages(run.agent_id, run.run))
    assert "[thinking, redacted by the API: " in text
    data = next(b["data"] for b in issued if b["type"] == "redacted_thinking")
    assert data not in text, "encrypted data is never shown"


async def test_effort_and_display_reach_the_model_and_the_summary_shows_in_show_run(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, fleet: FleetActivities
) -> None:
    fake_llm.set_responder(looker)
    run = await one_run(ts_env, store, fleet, llm_effort="low", llm_thinking_display="summarized")
    assert run.status == RunStatus.OK, run.error
    first = fake_llm.requests[0]
    assert first.body["output_config"] == {"effort": "low"}
    assert first.body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert first.max_tokens == 4_096 + THINKING_ROOM["low"]
    assert first.content is not None and first.content[0]["thinking"] == SUMMARY
    text = run_detail(run, store.messages.run_messages(run.agent_id, run.run))
    assert "[thinking]\n" in text and SUMMARY in text
    assert first.content[0]["signature"] not in text, "signatures are never shown"
    assert f"({run.usage.thinking_tokens} thinking)" in text


async def test_a_later_run_never_reads_an_earlier_runs_thinking(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, fleet: FleetActivities
) -> None:
    fake_llm.set_responder(looker)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await h.start_agent(
            monitor_enabled=False, heartbeat_seconds=3600, llm_thinking_display="summarized"
        )
        await ts_env.sleep(11)
        await wait_runs(store, handle.id, 1)
        await handle.signal(FleetAgentWorkflow.human_message, {"text": "Anything to do?"})
        runs = await wait_runs(store, handle.id, 2)
    assert [r.status for r in runs] == [RunStatus.OK, RunStatus.OK]
    second_run = next(r for r in fake_llm.requests if "Anything to do?" in r.all_text())
    assert SUMMARY not in str(second_run.body["messages"])
    assert "The fleet is as it should be." in second_run.all_text(), "the answer is history"


# ---------------------------------------------------------------- the summariser


@pytest.fixture
def runs_to_fold(store: Store) -> Store:
    for run in range(1, 13):
        add_run(store, run)
    return store


async def summarise(fake: FakeAnthropic, store: Store) -> tuple[str, str, Request]:
    provider = AnthropicProvider(api_key="k", base_url=fake.base_url)
    try:
        result = await ActivityEnvironment().run(
            CompactActivities(store, provider).compact_session,
            CompactRequest(agent_id="a", session=1, run=13, history_token_budget=COMPACT_BUDGET),
        )
    finally:
        await provider.aclose()
    assert result.folded_runs > 0
    summary = store.summaries.latest_summary("a", 1, before_run=14)
    assert summary is not None
    return summary.source, summary.fallback_reason, fake.requests[-1]


async def test_the_summariser_thinks_a_little_and_writes_the_summary(
    fake_llm: FakeAnthropic, runs_to_fold: Store
) -> None:
    fake_llm.set_responder(lambda req: Reply(text="- op1 asked for a 4090; rented"))
    source, reason, req = await summarise(fake_llm, runs_to_fold)
    assert (source, reason) == ("llm", "")
    assert req.body["output_config"] == {"effort": "low"}
    cap = summary_body_cap(COMPACT_BUDGET)
    assert req.max_tokens == cap + THINKING_ROOM["low"], "room to think and to answer"
    assert req.thinking_tokens and req.thinking_tokens > 0


async def test_a_summary_cut_off_while_thinking_falls_back_to_the_digest(
    fake_llm: FakeAnthropic, runs_to_fold: Store
) -> None:
    fake_llm.set_responder(lambda req: Reply(text="- never written", thinking_tokens=50_000))
    source, reason, req = await summarise(fake_llm, runs_to_fold)
    assert source == "digest"
    assert "stopped with max_tokens" in reason and "tokens of thinking" in reason
    assert req.content is not None and [b["type"] for b in req.content] == ["thinking"]
    assert req.content[0]["signature"] == "", "cut before its signature"
    summary = runs_to_fold.summaries.latest_summary("a", 1, before_run=14)
    assert summary is not None and "op1 said: Please rent one more 4090" in summary.body


async def test_a_run_over_its_share_folds_and_the_model_keeps_its_thinking_valid(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, fleet: FleetActivities
) -> None:
    """Condensing one older tool result would change what a later thinking
    block was given (a 400 from a model that binds its blocks to the
    conversation): the run is folded whole, and the rounds after the fold
    keep the layout, so every block they send back is still valid."""

    def searcher(req: Request) -> Reply:
        # By request, not by the turns in it: a fold takes the turns away.
        if len(fake_llm.requests) < 5:
            return Reply(text="More offers.", tool_calls=[("search_offers", {"limit": 25})])
        return Reply(text=DONE)

    fake_llm.set_responder(searcher)
    run = await one_run(ts_env, store, fleet, history_token_budget=1_000)
    assert run.status == RunStatus.OK, run.error
    assert run.rounds == 5
    folded = [r for r in fake_llm.requests if FOLD_HEADING in str(r.body["messages"][-1])]
    assert folded, "the run's messages outgrew their share"
    later = fake_llm.requests[fake_llm.requests.index(folded[0]) + 1 :]
    assert later and all(FOLD_HEADING in str(r.body["messages"][0]) for r in later)
    assert all(r.usage is not None for r in fake_llm.requests), "no request was refused"
