"""The call_llm activity, outside any workflow: ActivityEnvironment, a real
Store on a temporary SQLite file, and the real AnthropicProvider talking to the
local fake Messages API (which validates every request like the real one).
A repeated or concurrent call asks once; HTTP errors map to Temporal's; tool
results and earlier runs become the prompt. Heartbeats and streaming:
tests/llm/test_llm_activity_heartbeats.py; prompt caching:
tests/llm/test_llm_activity_cache.py."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError

from fleet_agent.models import RunResult, RunStatus, Verdict
from testkit.fakes.anthropic_server import Reply
from tests.helpers.llm_activity import AGENT, VERDICT_ACTED, Rig, _by_text, _results_for, rig

__all__ = ["rig"]  # the fixture, imported for pytest


async def test_a_repeated_call_returns_the_stored_reply_without_asking_again(rig: Rig) -> None:
    rig.script(Reply(text=f"Hello.\n{VERDICT_ACTED}"))
    await rig.open_run(1, "hi")
    first = await rig.call(1, 1)
    again = await rig.call(1, 1)
    assert not first.replayed and again.replayed
    assert again.model_dump(exclude={"replayed"}) == first.model_dump(exclude={"replayed"})
    assert first.verdict == Verdict(action=True, state_changed=True)
    assert first.stop_reason == "end_turn" and first.usage.output_tokens > 0
    assert len(rig.fake.requests) == 1
    assert [m.kind for m in rig.store.messages.run_messages(AGENT, 1)] == ["context", "assistant"]


async def test_concurrent_attempts_store_one_reply_and_both_return_it(rig: Rig) -> None:
    # Two attempts of the same (run, round) both reach the API (think: a retry
    # after a timeout while the first attempt was still running); the second
    # to finish must hand back the reply the first one stored.
    rig.fake.latency = 0.3
    rig.fake.set_responder(lambda req: Reply(tool_calls=[("get_fleet_status", {})]))
    await rig.open_run(1, "hi")
    a, b = await asyncio.gather(rig.call(1, 1), rig.call(1, 1))
    assert len(rig.fake.requests) == 2, "both attempts asked"
    assert sorted([a.replayed, b.replayed]) == [False, True]
    assert a.tool_calls == b.tool_calls, "one answer for the round (tool_use ids are random)"
    assert [m.kind for m in rig.store.messages.run_messages(AGENT, 1)] == ["context", "assistant"]


async def test_http_400_is_a_non_retryable_llm_permanent_error(rig: Rig) -> None:
    rig.fake.fail_next(400, message="messages: bad thing")
    await rig.open_run(1, "hi")
    with pytest.raises(ApplicationError) as err:
        await rig.call(1, 1)
    assert err.value.type == "LlmPermanent"
    assert err.value.non_retryable
    assert "400" in err.value.message and "messages: bad thing" in err.value.message
    assert [m.kind for m in rig.store.messages.run_messages(AGENT, 1)] == ["context"], (
        "nothing stored"
    )


async def test_http_429_is_retryable_after_the_servers_delay(rig: Rig) -> None:
    rig.fake.fail_next(429, headers={"retry-after": "7"})
    await rig.open_run(1, "hi")
    with pytest.raises(ApplicationError) as err:
        await rig.call(1, 1)
    assert err.value.type == "LlmRetryable"
    assert not err.value.non_retryable
    assert err.value.next_retry_delay == timedelta(seconds=7)
    assert [m.kind for m in rig.store.messages.run_messages(AGENT, 1)] == ["context"]
    # Temporal's retry then gets the answer, stored once.
    result = await rig.call(1, 1)
    assert not result.replayed and result.verdict is not None
    assert len(rig.fake.requests) == 2
    assert [m.kind for m in rig.store.messages.run_messages(AGENT, 1)] == ["context", "assistant"]


async def test_call_without_a_context_message_is_permanent_and_asks_nothing(rig: Rig) -> None:
    with pytest.raises(ApplicationError) as err:
        await rig.call(1, 1)
    assert err.value.type == "LlmPermanent" and err.value.non_retryable
    assert rig.fake.requests == []


async def test_tool_results_become_tool_result_blocks_for_every_tool_use(rig: Rig) -> None:
    rig.script(
        Reply(
            text="Checking.",
            tool_calls=[
                ("get_fleet_status", {}),
                ("schedule_next_check", {"delay_seconds": 900, "reason": "loading"}),
                ("get_fleet_status", {}),
            ],
        ),
        Reply(text=f"All checked.\n{VERDICT_ACTED}"),
    )
    await rig.open_run(1, "status?")
    first = await rig.call(1, 1)
    assert [c.name for c in first.tool_calls] == [
        "get_fleet_status",
        "schedule_next_check",
        "get_fleet_status",
    ]
    assert first.verdict is None and first.verdict_error == "", "no verdict on a tool round"
    results = _results_for(first)
    results[1] = results[1].model_copy(update={"is_error": True})
    await rig.store_results(1, 1, results)
    second = await rig.call(1, 2)  # the fake answers 400 if any tool_use is left unpaired
    assert second.verdict == Verdict(action=True, state_changed=True)
    request = rig.fake.requests[1]
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"]
    blocks = request.tool_results()
    assert [b["tool_use_id"] for b in blocks] == [c.id for c in first.tool_calls]
    assert [b.get("is_error", False) for b in blocks] == [False, True, False]
    assert blocks[1]["content"] == "ok schedule_next_check"
    assert [m.seq for m in rig.store.messages.run_messages(AGENT, 1)] == [0, 1, 2, 3]


async def test_unpaired_tool_results_are_refused_by_the_fake(rig: Rig) -> None:
    # The control for the test above: the fake does check the pairing.
    rig.script(Reply(tool_calls=[("get_fleet_status", {}), ("get_fleet_status", {})]))
    await rig.open_run(1, "status?")
    first = await rig.call(1, 1)
    await rig.store_results(1, 1, _results_for(first)[:1])
    with pytest.raises(ApplicationError) as err:
        await rig.call(1, 2)
    assert err.value.type == "LlmPermanent" and "tool_result" in err.value.message


async def test_prompt_carries_only_final_texts_of_earlier_in_prompt_runs(rig: Rig) -> None:
    rig.fake.set_responder(_by_text)
    # Run 1: a tool round, then a final answer: in the prompt.
    await rig.open_run(1, "alpha")
    r1 = await rig.call(1, 1)
    await rig.store_results(1, 1, _results_for(r1, "TOOL-OUTPUT-ALPHA"))
    r1b = await rig.call(1, 2)
    await rig.record(
        RunResult(
            run=1, status=RunStatus.OK, verdict=r1b.verdict, rounds=2, tool_calls=1, in_prompt=True
        ),
        final_round=2,
    )
    # Run 2: a no-op, left out of the prompt.
    await rig.open_run(2, "beta")
    r2 = await rig.call(2, 1)
    await rig.record(
        RunResult(run=2, status=RunStatus.OK, verdict=r2.verdict, noop=True, in_prompt=False),
        final_round=1,
    )
    # Run 3: failed after one tool round: it is in the prompt, as a failure.
    await rig.open_run(3, "gamma")
    await rig.call(3, 1)
    await rig.record(
        RunResult(run=3, status=RunStatus.FAILED, error="boom", in_prompt=True), final_round=None
    )
    # Run 4 of another session: never in session 1's prompt.
    await rig.open_run(4, "delta", session=2)
    await rig.call(4, 1, session=2)
    await rig.record(RunResult(run=4, status=RunStatus.OK, in_prompt=True), 1, session=2)

    await rig.open_run(5, "epsilon")
    await rig.call(5, 1)
    request = rig.fake.requests[-1]
    prompt = request.all_text()
    assert "FINAL-ALPHA" in prompt
    assert "this run failed before it could answer" in prompt
    for absent in (
        "THINKING-ALPHA",
        "TOOL-OUTPUT-ALPHA",
        "NOOP-BETA",
        "beta",
        "FAILED-GAMMA-PARTIAL",
        "delta",
        "FINAL-OTHER",
    ):
        assert absent not in prompt, absent
    roles = [m["role"] for m in request.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert "epsilon" in request.last_user_text()
    # Texts only (a cache breakpoint turns a text into one marked text block).
    assert all(isinstance(m["content"], str) for m in request.plain_messages)
