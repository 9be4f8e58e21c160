"""Thinking passed back to the fake Messages API
(testkit/fakes/anthropic_signatures.py), through the real SDK: an exact echo
passes and is billed as input; altered, foreign or malformed blocks are
refused; what binds a block to its prefix, per model."""

from __future__ import annotations

import copy
from typing import Any

import anthropic

from testkit.fakes import FakeAnthropic
from testkit.fakes.anthropic_signatures import BOUND_ELSEWHERE, INVALID_SIGNATURE
from tests.helpers.fake_thinking import (
    SONNET_55,
    STREAM,
    TOOLS,
    blocks,
    call,
    client,
    cycle,
    fake,
    rejected,
    results,
)

__all__ = ["client", "fake"]  # the fixtures, imported for pytest


@STREAM
def test_a_tool_use_cycle_echoed_exactly_passes_and_is_billed_as_input(
    client: anthropic.Anthropic, fake: FakeAnthropic, stream: bool
) -> None:
    messages = cycle(client, stream)
    reply = call(client, stream=stream, messages=messages)
    assert reply.content[-1].type == "text"
    without = copy.deepcopy(messages)
    without[1]["content"] = [b for b in without[1]["content"] if b["type"] in ("text", "tool_use")]
    count = client.messages.count_tokens(model=SONNET_55, messages=without, tools=TOOLS)  # type: ignore[arg-type]
    # The echoed signatures stand for ~1,000 thinking tokens: they cost input.
    assert reply.usage.input_tokens > count.input_tokens + 500


def altered(messages: list[dict[str, Any]], change: Any) -> list[dict[str, Any]]:
    out = copy.deepcopy(messages)
    change(out[1]["content"])
    return out


@STREAM
def test_thinking_passed_back_wrong_gets_a_400(client: anthropic.Anthropic, stream: bool) -> None:
    messages = cycle(client, stream)
    invalid = INVALID_SIGNATURE.format(where="messages.1.content.0")

    def set_text(content: list[dict[str, Any]]) -> None:
        content[0]["thinking"] = "I thought otherwise."

    def set_signature(content: list[dict[str, Any]]) -> None:
        content[0]["signature"] = content[0]["signature"][:-8] + "AAAAAAAA"

    assert rejected(client, stream=stream, messages=altered(messages, set_text)) == invalid
    assert rejected(client, stream=stream, messages=altered(messages, set_signature)) == invalid

    dropped = altered(messages, lambda c: c.pop(0))
    assert "dropped thinking (block 0)" in rejected(client, stream=stream, messages=dropped)
    no_redacted = altered(messages, lambda c: c.pop(1))
    message = rejected(client, stream=stream, messages=no_redacted)
    assert message.startswith("messages.1: the assistant message is not the exact echo")
    assert "dropped redacted_thinking (block 1)" in message
    reordered = altered(messages, lambda c: c.insert(3, c.pop(4)))  # thinking before tool_use 1
    assert "reordered" in rejected(client, stream=stream, messages=reordered)
    retargeted = altered(messages, lambda c: c[3]["input"].update(region="us"))
    assert "content.3 (tool_use list_instances) was altered" in rejected(
        client, messages=retargeted
    )
    unknown = altered(messages, lambda c: c[1].update(data="Zm9v" * 40))
    assert rejected(client, messages=unknown) == (
        "messages.1.content.1: Invalid `data` in `redacted_thinking` block."
    )


def test_a_block_from_another_account_is_refused(
    client: anthropic.Anthropic, fake: FakeAnthropic
) -> None:
    messages = cycle(client)
    other = anthropic.Anthropic(base_url=fake.base_url, api_key="sk-ant-other", max_retries=0)
    assert rejected(other, messages=messages) == INVALID_SIGNATURE.format(
        where="messages.1.content.0"
    )


def condensed_history(client: anthropic.Anthropic, model: str) -> list[dict[str, Any]]:
    """Two rounds of a tool-use cycle, then the first tool result condensed."""
    first: list[dict[str, Any]] = [{"role": "user", "content": "Check the fleet."}]
    one = blocks(call(client, model=model, messages=first))
    messages: list[dict[str, Any]] = [
        *first,
        {"role": "assistant", "content": one},
        results(one, "x" * 2_000),
    ]
    two = blocks(call(client, model=model, messages=messages))
    messages += [{"role": "assistant", "content": two}, results(two)]
    assert call(client, model=model, messages=messages).stop_reason == "end_turn"
    messages[2]["content"][0]["content"] = "[condensed]"
    return messages


def test_a_changed_earlier_message_unbinds_sonnet_5_5_blocks_but_not_sonnet_5(
    client: anthropic.Anthropic,
) -> None:
    messages = condensed_history(client, SONNET_55)
    assert rejected(client, messages=messages) == BOUND_ELSEWHERE.format(
        where="messages.3.content.0"
    )
    assert rejected(client, messages=messages).endswith(
        'set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )
    messages = condensed_history(client, "claude-sonnet-5")
    assert call(client, model="claude-sonnet-5", messages=messages).stop_reason == "end_turn"


def test_cache_markers_are_not_part_of_the_prefix(client: anthropic.Anthropic) -> None:
    messages = cycle(client)
    messages[0]["content"] = [
        {"type": "text", "text": "Check the fleet.", "cache_control": {"type": "ephemeral"}}
    ]
    assert call(client, messages=messages).stop_reason == "end_turn"


def test_a_block_another_model_cannot_read_is_dropped_silently_and_not_billed(
    client: anthropic.Anthropic,
) -> None:
    messages = cycle(client)
    reply = call(client, model="claude-opus-5", messages=messages)
    assert reply.stop_reason == "end_turn"
    readable = altered(
        messages,
        lambda c: c.__setitem__(
            slice(None), [b for b in c if b["type"] not in ("thinking", "redacted_thinking")]
        ),
    )
    counted = client.messages.count_tokens(model="claude-opus-5", messages=readable, tools=TOOLS)  # type: ignore[arg-type]
    assert reply.usage.input_tokens == counted.input_tokens


def test_malformed_thinking_blocks_are_refused(client: anthropic.Anthropic) -> None:
    messages = cycle(client)
    marked = altered(messages, lambda c: c[0].update(cache_control={"type": "ephemeral"}))
    assert "cannot carry cache_control" in rejected(client, messages=marked)
    unsigned = altered(messages, lambda c: c[0].pop("signature"))
    assert rejected(client, messages=unsigned) == (
        "messages.1.content.0.thinking.signature: Field required (a string)"
    )
    from_user = [{"role": "user", "content": [messages[1]["content"][0]]}]
    assert "can only appear in assistant messages" in rejected(client, messages=from_user)


def test_count_tokens_takes_thinking_without_checking_signatures(
    client: anthropic.Anthropic,
) -> None:
    messages = altered(cycle(client), lambda c: c[0].update(signature="bogus"))
    counted = client.messages.count_tokens(
        model=SONNET_55,
        messages=messages,  # type: ignore[arg-type]
        tools=TOOLS,  # type: ignore[arg-type]
        thinking={"type": "adaptive", "display": "summarized"},
        output_config={"effort": "low"},
    )
    assert counted.input_tokens > 0
