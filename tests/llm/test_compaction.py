"""Compaction through the whole loop: the agent and run workflows on the
time-skipping server, a real worker and the real anthropic client talking to
the fake Messages API. Human messages push the history over its budget; the
runs that leave the window fold into the session summary, written by the
model when it works and by the digest when it fails (HTTP 500), times out or
returns more than the summary's cap. The request stays within budget either
way."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

import activities.compact
from fleet_agent.llm.compaction import summary_cap
from fleet_agent.llm.prompt import estimate_tokens
from fleet_agent.store import Store
from testkit.fakes.anthropic_server import ErrorReply, FakeAnthropic, Reply, Request
from tests.helpers import running_worker, wait_runs
from workflows import FleetAgentWorkflow

BUDGET = 4_000
MESSAGES = 16
DONE = '<verdict>{"action": false, "state_changed": false}</verdict>'


def is_summariser(req: Request) -> bool:
    return "rolling summary" in req.system_text()


def message(n: int) -> str:
    # About 300 tokens each: the window of 3,500 tokens holds about ten runs.
    return f"Operator note {n}: " + " ".join(f"word{n}x{i}" for i in range(120))


def responder(mode: str) -> Any:
    def respond(req: Request) -> Reply | ErrorReply:
        if not is_summariser(req):
            return Reply(text=f"Understood.\n{DONE}")
        if mode == "failing":
            return ErrorReply(500)
        if mode == "timing out":
            return Reply(text="- too late", delay=3.0)
        if mode == "too much":
            return Reply(text="- run #1: " + "a long line " * 1_000)
        return Reply(text="- operators sent notes 1 and up; the agent noted each")

    return respond


def history_tokens(req: Request) -> int:
    """The request's summary and earlier runs, as the budget counts them."""
    system = req.body["system"]
    summary = system[1]["text"] if len(system) > 1 else ""
    earlier = req.plain_messages[:-1]  # the last one is this run's context
    return estimate_tokens(summary) + sum(estimate_tokens(m["content"]) for m in earlier)


@pytest.mark.parametrize("mode", ["working", "failing", "timing out", "too much"])
async def test_over_budget_compaction_keeps_the_request_under_budget(
    ts_env: WorkflowEnvironment,
    store: Store,
    fake_llm: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
) -> None:
    # Short enough for the fake's 3 s delay to time out, long enough that a
    # 12 kB reply on a loaded 2-core runner does not (0.5 s did, once).
    monkeypatch.setattr(activities.compact, "SUMMARY_TIMEOUT_SECONDS", 1.5)
    fake_llm.set_responder(responder(mode))
    async with running_worker(ts_env.client, store) as h:
        # The P0 window in real time: wait_runs polls the store, which skips no time.
        handle = await h.start_agent(history_token_budget=BUDGET, p0_debounce_seconds=0.1)
        await ts_env.sleep(11)
        await wait_runs(store, handle.id, 1)
        for n in range(1, MESSAGES + 1):
            await handle.signal(
                FleetAgentWorkflow.human_message, {"text": message(n), "author": f"op{n % 3}"}
            )
            await wait_runs(store, handle.id, n + 1)

    summaries = store.summaries.session_summaries(handle.id, 1)
    assert summaries, "nothing was folded"
    expected = "llm" if mode == "working" else "digest"
    assert {s.source for s in summaries} == {expected}
    reason = {
        "working": "",
        "failing": "the summariser failed",
        "timing out": "the summariser timed out",
        "too much": "over the cap",
    }[mode]
    assert all(reason in s.fallback_reason for s in summaries), summaries[0].fallback_reason
    assert all(s.tokens <= summary_cap(BUDGET) for s in summaries)
    # Rolling: each version starts where the previous one ended.
    assert [s.from_run for s in summaries[1:]] == [s.upto_run + 1 for s in summaries[:-1]]

    agent_requests = [r for r in fake_llm.requests if not is_summariser(r)]
    assert len(agent_requests) == MESSAGES + 1
    assert max(history_tokens(r) for r in agent_requests) <= BUDGET
    # The last request carries the newest summary in its summary slot.
    assert summaries[-1].body in agent_requests[-1].body["system"][1]["text"]

    if mode != "working":
        # The digest keeps every folded operator message's gist, author and time.
        body = summaries[-1].body
        for run in store.run_reads.list_runs(handle.id, limit=100):
            if summaries[0].first_run <= run.run <= summaries[-1].upto_run:
                for t in run.triggers:
                    if t.text:
                        assert f"{t.author} said: {t.text[:40]}" in body, t.text[:40]

    if mode == "working":
        # No round came near the model's window: none was counted (a count is
        # an HTTP round trip; tests/llm/test_token_count.py has the counted ones).
        assert fake_llm.count_tokens_requests == []
        # Between two moves of the window the summary and the history before
        # the newest run are byte-identical, so the cached prefix holds.
        same = 0
        for before, after in itertools.pairwise(agent_requests):
            if before.body["system"] == after.body["system"]:
                earlier = before.plain_messages[:-1]
                assert after.plain_messages[: len(earlier)] == earlier
                same += 1
        assert same >= 3
