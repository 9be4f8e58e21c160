"""The fake Messages API's thinking replies, like the real models'
(testkit/fakes/anthropic_thinking.py), through the real SDK streaming and not:
thinking between tool calls, redacted blocks, display, effort, max_tokens."""

from __future__ import annotations

from typing import Any

import anthropic

from testkit.fakes import FakeAnthropic, Reply
from testkit.fakes.anthropic_thinking import THINKING_TOKENS
from tests.helpers.fake_thinking import KEY, STREAM, blocks, call, client, fake, shape

__all__ = ["client", "fake"]  # the fixtures, imported for pytest


@STREAM
def test_a_thinking_reply_has_thinking_between_tool_calls_and_a_redacted_block(
    client: anthropic.Anthropic, fake: FakeAnthropic, stream: bool
) -> None:
    reply = call(client, stream=stream, messages=[{"role": "user", "content": "Check."}])
    # "Checking." (the text beside the calls) comes back as thinking on Sonnet 5.5.
    assert [b["type"] for b in blocks(reply)] == [
        "thinking",
        "redacted_thinking",
        "thinking",
        "tool_use",
        "thinking",
        "tool_use",
    ]
    first = blocks(reply)[0]
    assert first["thinking"] == blocks(reply)[2]["thinking"] == ""  # default display "omitted"
    assert len(first["signature"]) >= 100
    # The effort's (high, the default), and the text's tokens.
    thinking = THINKING_TOKENS["high"] + len("Checking.") // 4
    assert reply.usage.output_tokens_details is not None
    assert reply.usage.output_tokens_details.thinking_tokens == thinking
    assert reply.usage.output_tokens > thinking
    request = fake.requests[-1]
    assert request.thinking_tokens == thinking and request.thinking is None
    assert request.usage is not None and request.usage["output_tokens"] == reply.usage.output_tokens


def test_the_streamed_final_message_equals_the_non_streamed_body(
    client: anthropic.Anthropic,
) -> None:
    kwargs: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Check."}],
        "thinking": {"type": "adaptive", "display": "summarized"},
    }
    plain, streamed = call(client, **kwargs), call(client, stream=True, **kwargs)
    assert shape(streamed) == shape(plain)
    assert streamed.stop_reason == plain.stop_reason == "tool_use"
    assert streamed.usage.output_tokens == plain.usage.output_tokens
    assert streamed.usage.output_tokens_details == plain.usage.output_tokens_details


@STREAM
def test_display_summarized_returns_text_and_omitted_returns_empty_thinking(
    client: anthropic.Anthropic, stream: bool
) -> None:
    ask = [{"role": "user", "content": "Check the fleet."}]
    for display, empty in (("summarized", False), ("omitted", True)):
        reply = call(
            client, stream=stream, messages=ask, thinking={"type": "adaptive", "display": display}
        )
        texts = [b["thinking"] for b in blocks(reply) if b["type"] == "thinking"]
        # The lead, the reply's text, the note between the two calls.
        assert len(texts) == 3 and all((t == "") == empty for t in texts)
        assert (texts[1] == "Checking.") != empty
    fake_text = call(
        client,
        messages=ask,
        thinking={"type": "adaptive", "display": "summarized"},
        tools=[],
    )
    assert "Check the fleet." in blocks(fake_text)[0]["thinking"]


def test_effort_scales_the_thinking_tokens(client: anthropic.Anthropic) -> None:
    spent = {}
    for effort in ("low", "medium", "high", "xhigh", "max"):
        reply = call(
            client, messages=[{"role": "user", "content": "Hi"}], output_config={"effort": effort}
        )
        assert reply.usage.output_tokens_details is not None
        spent[effort] = reply.usage.output_tokens_details.thinking_tokens
        assert reply.usage.output_tokens > spent[effort]
    assert spent["low"] < spent["medium"] < spent["high"] < spent["xhigh"] < spent["max"]


@STREAM
def test_thinking_that_reaches_max_tokens_is_cut_without_a_signature(
    client: anthropic.Anthropic, fake: FakeAnthropic, stream: bool
) -> None:
    reply = call(
        client,
        stream=stream,
        max_tokens=400,
        messages=[{"role": "user", "content": "Check the fleet, please."}],
        thinking={"type": "adaptive", "display": "summarized"},
    )
    assert reply.stop_reason == "max_tokens"
    (block,) = blocks(reply)
    assert block["type"] == "thinking" and block["signature"] == ""
    assert 0 < len(block["thinking"]) < len(fake.requests[0].last_user_text()) + 100
    assert reply.usage.output_tokens == 400
    assert fake.requests[-1].thinking_tokens == 400


def test_redacted_every_nth_thinking_reply(fake: FakeAnthropic) -> None:
    client = anthropic.Anthropic(base_url=fake.base_url, api_key=KEY, max_retries=0)
    fake.thinking_registry.redacted_every = 3
    fake.set_responder(lambda request: Reply(text="Fine."))
    kinds = [
        [b["type"] for b in blocks(call(client, messages=[{"role": "user", "content": "Hi"}]))]
        for _ in range(6)
    ]
    redacted = [k for k, ks in enumerate(kinds, 1) if "redacted_thinking" in ks]
    assert redacted == [3, 6]
    assert kinds[2] == ["thinking", "redacted_thinking", "text"]
    fake.set_responder(lambda request: Reply(text="Fine.", redacted=False))
    assert "redacted_thinking" not in str(
        blocks(call(client, messages=[{"role": "user", "content": "x"}]))
    )
