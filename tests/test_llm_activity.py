"""The call_llm activity, outside any workflow: ActivityEnvironment, a real
Store on a temporary SQLite file, and the real AnthropicProvider talking to the
local fake Messages API (which validates every request like the real one)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.llm import LlmActivities, LlmHeartbeat
from activities.runlog import RunLogActivities
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.tools import FLEET_TOOLS, LOCAL_TOOLS
from fleet_agent.llm.transcript import PAUSED_TEXT, StoredReply, reply_text
from fleet_agent.models import (
    AgentConfig,
    LlmRequest,
    LlmResult,
    LoadContextRequest,
    RecordRunRequest,
    RunInput,
    RunResult,
    RunStatus,
    StoreToolResults,
    TokenUsage,
    ToolResult,
    Trigger,
    TriggerKind,
    Verdict,
)
from fleet_agent.store import Store
from testkit.fakes.anthropic_cache import cache_markers
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request

AGENT = "agent-llm"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CONFIG = AgentConfig()
VERDICT_ACTED = '<verdict>{"action": true, "state_changed": true}</verdict>'
VERDICT_NOOP = '<verdict>{"action": false, "state_changed": false}</verdict>'


class Rig:
    """The activities of one worker, and helpers to drive a run through them."""

    def __init__(self, store: Store, fake: FakeAnthropic) -> None:
        self.store = store
        self.fake = fake
        self.env = ActivityEnvironment()
        self.env.info = dataclasses.replace(self.env.info, started_time=NOW)
        self.runlog = RunLogActivities(store)
        self.llm = LlmActivities(store, AnthropicProvider())  # env points it at the fake

    async def open_run(self, run: int, text: str, *, session: int = 1) -> None:
        trigger = Trigger(seq=run, kind=TriggerKind.HUMAN_MESSAGE, received_at=NOW, text=text)
        inp = RunInput(agent_id=AGENT, run=run, session=session, triggers=[trigger], config=CONFIG)
        start = NOW + timedelta(minutes=run)
        await self.env.run(
            self.runlog.load_context, LoadContextRequest(run_input=inp, started_at=start)
        )

    async def call(self, run: int, rnd: int, *, session: int = 1) -> LlmResult:
        req = LlmRequest(agent_id=AGENT, run=run, session=session, round=rnd, config=CONFIG)
        return await self.env.run(self.llm.call_llm, req)

    async def store_results(self, run: int, rnd: int, results: list[ToolResult]) -> None:
        req = StoreToolResults(agent_id=AGENT, run=run, round=rnd, results=results)
        await self.env.run(self.runlog.store_tool_results, req)

    async def record(self, result: RunResult, final_round: int | None, session: int = 1) -> None:
        result.ended_at = NOW + timedelta(minutes=result.run, seconds=30)
        req = RecordRunRequest(
            agent_id=AGENT, session=session, result=result, final_round=final_round
        )
        await self.env.run(self.runlog.record_run, req)

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order."""
        queue = list(replies)
        self.fake.set_responder(lambda req: queue.pop(0))


@pytest.fixture
def rig(store: Store, fake_llm: FakeAnthropic) -> Iterator[Rig]:
    yield Rig(store, fake_llm)


def _results_for(result: LlmResult, content: str = "ok") -> list[ToolResult]:
    return [
        ToolResult(tool_use_id=c.id, name=c.name, content=f"{content} {c.name}")
        for c in result.tool_calls
    ]


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
    assert [m.kind for m in rig.store.run_messages(AGENT, 1)] == ["context", "assistant"]


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
    assert [m.kind for m in rig.store.run_messages(AGENT, 1)] == ["context", "assistant"]


async def test_http_400_is_a_non_retryable_llm_permanent_error(rig: Rig) -> None:
    rig.fake.fail_next(400, message="messages: bad thing")
    await rig.open_run(1, "hi")
    with pytest.raises(ApplicationError) as err:
        await rig.call(1, 1)
    assert err.value.type == "LlmPermanent"
    assert err.value.non_retryable
    assert "400" in err.value.message and "messages: bad thing" in err.value.message
    assert [m.kind for m in rig.store.run_messages(AGENT, 1)] == ["context"], "nothing stored"


async def test_http_429_is_retryable_after_the_servers_delay(rig: Rig) -> None:
    rig.fake.fail_next(429, headers={"retry-after": "7"})
    await rig.open_run(1, "hi")
    with pytest.raises(ApplicationError) as err:
        await rig.call(1, 1)
    assert err.value.type == "LlmRetryable"
    assert not err.value.non_retryable
    assert err.value.next_retry_delay == timedelta(seconds=7)
    assert [m.kind for m in rig.store.run_messages(AGENT, 1)] == ["context"]
    # Temporal's retry then gets the answer, stored once.
    result = await rig.call(1, 1)
    assert not result.replayed and result.verdict is not None
    assert len(rig.fake.requests) == 2
    assert [m.kind for m in rig.store.run_messages(AGENT, 1)] == ["context", "assistant"]


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
    assert [m.seq for m in rig.store.run_messages(AGENT, 1)] == [0, 1, 2, 3]


async def test_unpaired_tool_results_are_refused_by_the_fake(rig: Rig) -> None:
    # The control for the test above: the fake does check the pairing.
    rig.script(Reply(tool_calls=[("get_fleet_status", {}), ("get_fleet_status", {})]))
    await rig.open_run(1, "status?")
    first = await rig.call(1, 1)
    await rig.store_results(1, 1, _results_for(first)[:1])
    with pytest.raises(ApplicationError) as err:
        await rig.call(1, 2)
    assert err.value.type == "LlmPermanent" and "tool_result" in err.value.message


def _by_text(req: Request) -> Reply:
    text = req.last_user_text()
    if "alpha" in text and not req.tool_results():
        return Reply(
            text="THINKING-ALPHA",
            tool_calls=[("schedule_next_check", {"delay_seconds": 900, "reason": "r"})],
        )
    if req.tool_results():
        return Reply(text=f"FINAL-ALPHA\n{VERDICT_ACTED}")
    if "beta" in text:
        return Reply(text=f"NOOP-BETA\n{VERDICT_NOOP}")
    if "gamma" in text:
        return Reply(text="FAILED-GAMMA-PARTIAL", tool_calls=[("get_fleet_status", {})])
    return Reply(text=f"FINAL-OTHER\n{VERDICT_ACTED}")


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


# ---------------------------------------------------------------- streaming, heartbeats


class Beats:
    """Heartbeats of the activity under test, with how many requests the fake had seen."""

    def __init__(self, rig: Rig) -> None:
        self.details: list[LlmHeartbeat] = []
        self.requests_seen: list[int] = []
        self._rig = rig
        rig.env.on_heartbeat = self.record

    def record(self, *details: Any) -> None:
        self.details.append(LlmHeartbeat.model_validate(details[0]))
        self.requests_seen.append(len(self._rig.fake.requests))


async def test_heartbeats_from_the_start_and_as_the_reply_streams_in(rig: Rig) -> None:
    text = f"{'Checking every machine. ' * 6}\n{VERDICT_NOOP}"
    # About 60 deltas 50 ms apart: the stream takes 3 s or more.
    rig.script(Reply(text=text, chunk_chars=4, chunk_delay=0.05))
    await rig.open_run(1, "hi")
    beats = Beats(rig)
    result = await rig.call(1, 1)
    assert result.verdict == Verdict(action=False, state_changed=False)
    first, last = beats.details[0], beats.details[-1]
    assert beats.requests_seen[0] == 0, "the first beat comes before the request is sent"
    assert first.output_chars == 0 and first.reply is None
    streaming = [b.output_chars for b in beats.details if b.reply is None]
    assert any(0 < n < len(text) for n in streaming), "progress beats while the reply streams"
    assert streaming == sorted(streaming)
    assert last.reply is not None, "the finished reply is in the last heartbeat"
    stored = rig.store.get_message(AGENT, 1, 1)
    assert stored is not None
    assert last.reply == StoredReply.model_validate_json(stored.content)
    assert reply_text(last.reply.content) == text


async def test_a_reply_in_the_heartbeat_details_is_stored_without_asking_again(
    rig: Rig,
) -> None:
    await rig.open_run(1, "hi")
    earlier = StoredReply(
        content=[{"type": "text", "text": f"Answered before.\n{VERDICT_ACTED}"}],
        stop_reason="end_turn",
        model="claude-x",
        seconds=12.5,
    )
    details = LlmHeartbeat(output_chars=40, reply=earlier).model_dump(mode="json")
    rig.env.info = dataclasses.replace(rig.env.info, heartbeat_details=[details], attempt=2)
    beats = Beats(rig)
    result = await rig.call(1, 1)
    assert rig.fake.requests == [], "paid for once, by the earlier attempt"
    assert result.replayed and result.seconds == 12.5
    assert result.verdict == Verdict(action=True, state_changed=True)
    stored = rig.store.get_message(AGENT, 1, 1)
    assert stored is not None and StoredReply.model_validate_json(stored.content) == earlier
    assert beats.details[-1].reply == earlier, "kept in this attempt's details too"


@pytest.mark.parametrize(
    "details", [[], ["progress of an older worker"], [{"output_chars": 5}], [{"reply": 3}]]
)
async def test_heartbeat_details_without_a_reply_mean_asking_the_model(
    rig: Rig, details: list[Any]
) -> None:
    rig.script(Reply(text=f"Fresh.\n{VERDICT_NOOP}"))
    await rig.open_run(1, "hi")
    rig.env.info = dataclasses.replace(rig.env.info, heartbeat_details=details, attempt=2)
    result = await rig.call(1, 1)
    assert len(rig.fake.requests) == 1 and not result.replayed


class AssistantInsertFails(Store):
    """A real store whose first insert of an assistant reply fails (an outage)."""

    failures = 1

    def add_message(self, *args: Any, **kwargs: Any) -> bool:
        if "assistant" in args and self.failures:
            self.failures -= 1
            raise OSError("store unavailable")
        return super().add_message(*args, **kwargs)


async def test_the_reply_is_in_the_heartbeat_before_storing_it_fails(
    tmp_path: Path, fake_llm: FakeAnthropic
) -> None:
    store = AssistantInsertFails(f"sqlite:///{tmp_path / 'fleet.db'}")
    store.create_all()
    rig = Rig(store, fake_llm)
    rig.script(Reply(tool_calls=[("get_fleet_status", {})]))
    await rig.open_run(1, "hi")
    beats = Beats(rig)
    with pytest.raises(OSError, match="store unavailable"):
        await rig.call(1, 1)
    kept = beats.details[-1].reply
    assert kept is not None and kept.stop_reason == "tool_use"
    assert [m.kind for m in store.run_messages(AGENT, 1)] == ["context"]
    store.dispose()


async def test_a_pause_turn_reply_is_continued_after_a_note_never_as_a_prefill(rig: Rig) -> None:
    """Sonnet 5.5 refuses a conversation that ends with an assistant message:
    the paused reply goes back followed by a user note, which stays in place
    in the later rounds."""
    rig.script(
        Reply(text="Looking at the fleet first. ", stop_reason="pause_turn"),
        Reply(text="Now checking.", tool_calls=[("get_fleet_status", {})]),
        Reply(text=f"Done.\n{VERDICT_ACTED}"),
    )
    await rig.open_run(1, "status?")
    paused = await rig.call(1, 1)
    assert paused.stop_reason == "pause_turn" and paused.tool_calls == []
    going_on = await rig.call(1, 2)
    sent = rig.fake.requests[1].plain_messages
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[-1]["content"] == PAUSED_TEXT
    await rig.store_results(1, 2, _results_for(going_on))
    await rig.call(1, 3)
    later = rig.fake.requests[2].plain_messages
    assert [m["role"] for m in later] == ["user", "assistant", "user", "assistant", "user"]
    assert later[:2] == sent[:2], "the paused reply goes back as it was"
    assert later[2]["content"] == [{"type": "text", "text": PAUSED_TEXT}], "the note stays"
    assert [b["type"] for b in later[3]["content"] if b["type"] != "thinking"] == [
        "text",
        "tool_use",
    ]
    assert [m.seq for m in rig.store.run_messages(AGENT, 1)] == [0, 1, 3, 4, 5]


async def test_a_tool_call_cut_by_max_tokens_is_stored_and_returned_as_it_came(
    rig: Rig,
) -> None:
    offer = {"offer_id": 11, "reason": "a long explanation that gets cut"}
    rig.script(
        Reply(
            text="Renting.",
            tool_calls=[("create_instance", offer)],
            stop_reason="max_tokens",
            cut_json_at=len('{"offer_id": 11, "reason": "a long'),
        )
    )
    await rig.open_run(1, "more capacity")
    result = await rig.call(1, 1)
    assert result.stop_reason == "max_tokens"
    assert [(c.name, c.input) for c in result.tool_calls] == [("create_instance", {"offer_id": 11})]
    again = await rig.call(1, 1)
    assert again.replayed and again.tool_calls == result.tool_calls
    assert len(rig.fake.requests) == 1


async def test_a_refusal_is_returned_with_its_stop_reason(rig: Rig) -> None:
    rig.script(Reply(text="I can't help with that.", stop_reason="refusal"))
    await rig.open_run(1, "do something bad")
    result = await rig.call(1, 1)
    assert result.stop_reason == "refusal" and result.tool_calls == []
    assert result.verdict is None and result.verdict_error


# ---------------------------------------------------------------- prompt caching


def _reported(req: Request) -> TokenUsage:
    """The usage the fake answered `req` with, as the provider maps it."""
    usage = req.usage
    assert usage is not None
    return TokenUsage(
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cache_read_input_tokens=usage.get("cache_read_input_tokens", 0),
        cache_creation_input_tokens=usage.get("cache_creation_input_tokens", 0),
        cache_creation_1h_input_tokens=usage.get("cache_creation", {}).get(
            "ephemeral_1h_input_tokens", 0
        ),
        thinking_tokens=usage.get("output_tokens_details", {}).get("thinking_tokens", 0),
    )


async def test_cache_reads_from_the_second_round_and_on_the_next_runs(rig: Rig) -> None:
    # The worker's tool set: with the fleet tools, tools + system pass the
    # model's 1,024-token minimum by themselves (breakpoint A).
    rig.llm = LlmActivities(rig.store, AnthropicProvider(), LOCAL_TOOLS | FLEET_TOOLS)
    rig.fake.set_responder(_by_text)
    await rig.open_run(1, "alpha")
    r1 = await rig.call(1, 1)
    await rig.store_results(1, 1, _results_for(r1))
    r1b = await rig.call(1, 2)
    await rig.record(
        RunResult(run=1, status=RunStatus.OK, verdict=r1b.verdict, rounds=2, in_prompt=True),
        final_round=2,
    )
    for run in (2, 3):
        await rig.open_run(run, f"question {run}")
        answer = await rig.call(run, 1)
        await rig.record(
            RunResult(run=run, status=RunStatus.OK, verdict=answer.verdict, in_prompt=True), 1
        )
    first, second, run2, run3 = (_reported(r) for r in rig.fake.requests)
    # Round 1 of run 1: nothing to read; tools + system written for an hour,
    # the run's context for 5 minutes.
    assert first.cache_read_input_tokens == 0
    assert 1_024 <= first.cache_creation_1h_input_tokens < first.cache_creation_input_tokens
    # Round 2 reads everything round 1 wrote, and writes only the round.
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens < first.cache_creation_input_tokens
    # Run 2 reads tools + system; the history (run 1) is new: written for an hour.
    assert run2.cache_read_input_tokens == first.cache_creation_1h_input_tokens
    assert run2.cache_creation_1h_input_tokens > 0
    # Run 3 reads that too: tools, system and the history up to run 1.
    assert run3.cache_read_input_tokens == (
        run2.cache_read_input_tokens + run2.cache_creation_1h_input_tokens
    )
    assert all(len(cache_markers(req.body)) in (2, 3) for req in rig.fake.requests)
    # What the store keeps per round is what the API reported; per run, the sum.
    stored = {
        (m.run, m.round): StoredReply.model_validate_json(m.content).usage
        for run in (1, 2, 3)
        for m in rig.store.run_messages(AGENT, run)
        if m.kind == "assistant"
    }
    assert stored == {(1, 1): first, (1, 2): second, (2, 1): run2, (3, 1): run3}
