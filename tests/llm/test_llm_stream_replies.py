"""Streamed replies through the real anthropic client and the fake API's SSE:
progress reports, tool input from many JSON chunks, every stop reason, replies
cut by max_tokens."""

from __future__ import annotations

import json

import pytest

from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.base import LlmOptions, LlmPermanentError
from fleet_agent.llm.transcript import StoredReply, api_messages, dumps, tool_calls_of
from testkit.fakes import FakeAnthropic, Reply
from tests.helpers.llm_fake import fake, server
from tests.helpers.llm_stream import MESSAGES, MODEL, OFFER, answer, call, provider

__all__ = ["fake", "provider", "server"]  # the fixtures, imported for pytest


async def test_streamed_text_reports_progress_up_to_the_whole_text(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    text = "All quiet on the fleet. " * 10
    answer(Reply(text=text, chunk_chars=7, redacted=False), fake)
    seen: list[int] = []
    reply = await call(provider, on_progress=seen.append)
    assert [b["type"] for b in reply.content] == ["thinking", "text"]
    assert reply.content[-1] == {"type": "text", "text": text}
    assert reply.stop_reason == "end_turn" and reply.model == MODEL
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    assert fake.requests[0].stream and len(fake.requests) == 1
    assert seen[0] == 0, "reported once the response starts, before any text"
    # The thinking is omitted (the default display): only the text streams.
    assert seen == sorted(seen) and seen[-1] == len(text)
    assert len(set(seen)) > len(text) // 7, "one step per delta"


async def test_streamed_summarised_thinking_counts_as_progress(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    """A model thinking for minutes is alive: its thinking deltas are progress."""
    thought = "The fleet holds the target; nothing to rent. " * 5
    answer(Reply(text="Fine.", thinking=thought, chunk_chars=9), fake)
    seen: list[int] = []
    options = LlmOptions(thinking_display="summarized")
    reply = await call(provider, on_progress=seen.append, options=options)
    assert reply.content[0]["thinking"] == thought and reply.content[0]["signature"]
    assert seen == sorted(seen) and seen[-1] == len(thought) + len("Fine.")
    assert len([n for n in set(seen) if n <= len(thought)]) > len(thought) // 9


async def test_streamed_tool_use_input_arrives_whole_from_many_json_chunks(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    answer(
        Reply(
            text="Renting.", tool_calls=[("create_instance", OFFER)], chunk_chars=3, redacted=False
        ),
        fake,
    )
    seen: list[int] = []
    reply = await call(provider, on_progress=seen.append)
    assert reply.stop_reason == "tool_use"
    # Sonnet 5.5: "Renting." comes back in a thinking block of its own.
    assert [b["type"] for b in reply.content] == ["thinking", "thinking", "tool_use"]
    (use,) = reply.tool_uses
    assert use["input"] == OFFER and use["name"] == "create_instance"
    assert use["id"].startswith("toolu_")
    # Display "omitted" (the provider's default): the text is not sent.
    assert reply.content[1]["thinking"] == "" and seen[-1] == len(json.dumps(OFFER))


@pytest.mark.parametrize(
    "stop_reason",
    [
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
        "a_stop_reason_from_the_future",
    ],
)
async def test_every_stop_reason_is_returned_as_sent(
    fake: FakeAnthropic, provider: AnthropicProvider, stop_reason: str
) -> None:
    answer(Reply(text="Partial thought", stop_reason=stop_reason), fake)
    reply = await call(provider)
    assert reply.stop_reason == stop_reason
    assert reply.text == "Partial thought"


async def test_max_tokens_inside_a_tool_call_keeps_the_complete_part_of_its_input(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    full = json.dumps(OFFER)
    cut = full.index("proofs")  # inside the "reason" string
    answer(
        Reply(
            text="Renting two.",
            tool_calls=[("create_instance", {"offer_id": 3}), ("create_instance", OFFER)],
            stop_reason="max_tokens",
            cut_json_at=cut,
            chunk_chars=5,
        ),
        fake,
    )
    reply = await call(provider)
    assert reply.stop_reason == "max_tokens"
    first, second = reply.tool_uses
    assert first["input"] == {"offer_id": 3}, "the calls before the cut are whole"
    assert second["input"] == {"offer_id": 7}, "the cut call keeps its complete keys"
    calls = tool_calls_of(reply.content)
    assert [c.input for c in calls] == [{"offer_id": 3}, {"offer_id": 7}]
    # It can be stored and sent back as the assistant turn of a conversation.
    stored = StoredReply(content=reply.content, stop_reason=reply.stop_reason, model=reply.model)
    back = api_messages([(0, "Fleet below target."), (1, dumps(stored))])
    assert back[1] == {"role": "assistant", "content": reply.content}


async def test_max_tokens_before_any_tool_input_gives_an_empty_input(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    answer(
        Reply(tool_calls=[("create_instance", OFFER)], stop_reason="max_tokens", cut_json_at=0),
        fake,
    )
    reply = await call(provider)
    assert reply.stop_reason == "max_tokens"
    assert reply.tool_uses[0]["input"] == {}
    assert tool_calls_of(reply.content)[0].input == {}


async def test_a_conversation_ending_with_an_assistant_message_is_never_sent(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    """A prefill, which Sonnet 5.5 refuses with a 400: the provider refuses it
    first, as permanent, and sends nothing."""
    paused = [*MESSAGES, {"role": "assistant", "content": [{"type": "text", "text": "Half"}]}]
    with pytest.raises(LlmPermanentError, match="prefill"):
        await call(provider, messages=paused)
    assert fake.requests == []
