"""The Anthropic provider's replies from the fake Messages API: the request's
shape, text and tool-use blocks, usage, and content that goes back as the next turn."""

from __future__ import annotations

from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.models import TokenUsage
from testkit.fakes import DEFAULT_TEXT, FakeAnthropic, Reply
from tests.helpers.llm_fake import fake, server
from tests.helpers.llm_provider import MESSAGES, MODEL, SYSTEM, TOOLS, call, provider

__all__ = ["fake", "provider", "server"]  # the fixtures, imported for pytest


async def test_text_reply_and_request_shape(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.set_responder(lambda req: Reply(text="All quiet."))
    reply = await call(provider)
    # The model thought first: its block comes back with the text, as it came.
    assert reply.content == fake.requests[0].content
    thinking, text = reply.content
    assert thinking["type"] == "thinking" and thinking["signature"]
    assert text == {"type": "text", "text": "All quiet."}
    assert reply.stop_reason == "end_turn"
    assert reply.model == MODEL
    assert reply.text == "All quiet.", "thinking is not the answer"
    assert len(fake.requests) == 1
    body = fake.requests[0].body
    assert body["model"] == MODEL
    assert body["system"] == SYSTEM
    assert body["messages"] == MESSAGES
    assert body["tools"] == TOOLS
    assert body["max_tokens"] == 1024
    assert body["thinking"] == {"type": "adaptive", "display": "omitted"}
    assert "output_config" not in body, "no effort asked for: the model's default"
    assert body["stream"] is True, "one streamed request"
    assert fake.requests[0].stream


async def test_default_responder_gives_a_verdict(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    reply = await call(provider)
    assert reply.text == DEFAULT_TEXT
    assert reply.text.endswith('<verdict>{"action": false, "state_changed": false}</verdict>')


async def test_tool_use_reply_parsed_into_blocks(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.set_responder(
        lambda req: Reply(
            text="Let me look.",
            tool_calls=[("list_instances", {}), ("destroy_instance", {"id": "i-1", "why": None})],
            redacted=False,
        )
    )
    reply = await call(provider)
    assert reply.stop_reason == "tool_use"
    # Sonnet 5.5: the text alongside the calls and the notes between two
    # calls come back as thinking blocks (testkit/fakes/anthropic_thinking.py).
    kinds = ["thinking", "thinking", "tool_use", "thinking", "tool_use"]
    assert [b["type"] for b in reply.content] == kinds
    first, second = reply.tool_uses
    assert set(first) == {"type", "id", "name", "input"}
    assert first["name"] == "list_instances" and first["input"] == {}
    assert second["name"] == "destroy_instance"
    # a null inside the tool input is the model's, not to be dropped
    assert second["input"] == {"id": "i-1", "why": None}
    assert first["id"].startswith("toolu_") and first["id"] != second["id"]


async def test_reply_content_round_trips_as_the_next_assistant_turn(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.set_responder(lambda req: Reply(tool_calls=[("list_instances", {})]))
    first = await call(provider)
    tool_id = first.tool_uses[0]["id"]
    fake.set_responder(None)
    messages = [
        *MESSAGES,
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": "none rented"}],
        },
    ]
    second = await call(provider, messages=messages)
    assert second.stop_reason == "end_turn"
    assert fake.requests[-1].last_user_text() == "none rented"


async def test_usage_mapped(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.set_responder(
        lambda req: Reply(
            text="x", usage=(123, 45), cache_read_input_tokens=7, cache_creation_input_tokens=9
        )
    )
    reply = await call(provider)
    # The default model thinks; a scripted usage caps what it says of it.
    reported = fake.requests[-1].usage
    assert reported is not None
    thinking = reported["output_tokens_details"]["thinking_tokens"]
    assert thinking > 0
    assert reply.usage == TokenUsage(
        input_tokens=123,
        output_tokens=45,
        cache_read_input_tokens=7,
        cache_creation_input_tokens=9,
        thinking_tokens=thinking,
    )
    fake.set_responder(lambda req: Reply(text="x", usage=(5, 6), think=False))
    reply = await call(provider)  # no cache fields, no thinking
    assert reply.usage == TokenUsage(input_tokens=5, output_tokens=6)


async def test_empty_system_and_tools_are_omitted(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    await call(provider, system="", tools=[])
    body = fake.requests[0].body
    assert "system" not in body and "tools" not in body
