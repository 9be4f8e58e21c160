"""Which thinking and sampling settings the fake Messages API accepts per model
(testkit/fakes/anthropic_models.py), through the real SDK: Sonnet 5.5's
refusals, older models, forced tools, unknown names."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from testkit.fakes import FakeAnthropic, Reply
from tests.helpers.fake_thinking import blocks, call, client, fake, rejected

__all__ = ["client", "fake"]  # the fixtures, imported for pytest


HI = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"thinking": {"type": "disabled"}},
            '"thinking.type.disabled" is not supported for this model. '
            'Use "thinking.type.between_tools"',
        ),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" '
            'and "output_config.effort" to control thinking behavior.',
        ),
        ({"extra_body": {"temperature": 0.5}}, "`temperature` is deprecated for this model."),
        ({"extra_body": {"top_p": 0.9}}, "`top_p` is deprecated for this model."),
        ({"extra_body": {"top_k": 5}}, "`top_k` is deprecated for this model."),
        (
            {"tool_choice": {"type": "any"}},
            'tool_choice: type "tool" and "any" are not supported for this model.',
        ),
        (
            {"tool_choice": {"type": "tool", "name": "get_prices"}},
            'tool_choice: type "tool" and "any"',
        ),
        (
            {"messages": [*HI, {"role": "assistant", "content": "Sure"}]},
            "This model does not support assistant message prefill. "
            "The conversation must end with a user message.",
        ),
        (
            {"thinking": {"type": "between_tools"}, "output_config": {"effort": "xhigh"}},
            '"thinking.type.between_tools" is not supported with effort "xhigh"',
        ),
        (
            {"thinking": {"type": "between_tools"}, "output_config": {"effort": "max"}},
            '"thinking.type.between_tools" is not supported with effort "max"',
        ),
        ({"thinking": {"type": "adaptive", "display": "full"}}, "thinking.adaptive.display"),
        ({"output_config": {"effort": "extreme"}}, "output_config.effort: Input should be"),
        ({"max_tokens": 200_000, "timeout": 30}, "max_tokens: 200000 > 128000"),
    ],
)
def test_sonnet_5_5_refuses_these_settings(
    client: anthropic.Anthropic, kwargs: dict[str, Any], message: str
) -> None:
    kwargs.setdefault("messages", HI)
    assert rejected(client, **kwargs).startswith(message)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tool_choice": {"type": "auto"}},
        {"tool_choice": {"type": "none"}},
        {"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}},
        {"thinking": {"type": "between_tools"}, "output_config": {"effort": "low"}},
    ],
)
def test_sonnet_5_5_accepts_these_settings(
    client: anthropic.Anthropic, kwargs: dict[str, Any]
) -> None:
    assert call(client, messages=HI, **kwargs).stop_reason == "tool_use"


def test_between_tools_thinks_only_between_tool_calls(
    client: anthropic.Anthropic, fake: FakeAnthropic
) -> None:
    reply = call(client, messages=HI, thinking={"type": "between_tools"})
    kinds = [b["type"] for b in blocks(reply)]
    # The reply's text and the note between the calls, each a thinking block.
    assert kinds == ["thinking", "tool_use", "thinking", "redacted_thinking", "tool_use"]
    assert blocks(reply)[0]["thinking"] == "Checking."
    assert blocks(reply)[2]["thinking"]  # progress notes come with summary text
    fake.set_responder(lambda request: Reply(text="Just text."))
    assert [
        b.type for b in call(client, messages=HI, thinking={"type": "between_tools"}).content
    ] == ["text"]


def test_older_models_accept_sampling_and_think_only_when_asked(
    client: anthropic.Anthropic,
) -> None:
    old = "claude-sonnet-4-5"
    reply = call(client, model=old, messages=HI, extra_body={"temperature": 0.2})
    assert [b.type for b in reply.content] == ["text", "tool_use", "tool_use"]
    assert reply.usage.output_tokens_details is None
    assert call(client, model=old, messages=[*HI, {"role": "assistant", "content": "Sure"}]).content
    assert rejected(client, model=old, messages=HI, output_config={"effort": "high"}).startswith(
        "output_config.effort"
    )
    assert (
        rejected(client, model=old, messages=HI, thinking={"type": "adaptive"})
        == '"thinking.type.adaptive" is not supported for this model.'
    )
    assert "1024" in rejected(
        client, model=old, messages=HI, thinking={"type": "enabled", "budget_tokens": 500}
    )
    enabled = call(
        client, model=old, messages=HI, thinking={"type": "enabled", "budget_tokens": 1024}
    )
    assert blocks(enabled)[0]["thinking"]  # summarized by default on 4.x
    assert enabled.usage.output_tokens_details is not None
    assert enabled.usage.output_tokens_details.thinking_tokens == 1000


def test_sonnet_4_6_thinks_when_asked_and_has_no_xhigh(client: anthropic.Anthropic) -> None:
    model = "claude-sonnet-4-6"
    assert call(client, model=model, messages=HI).content[0].type == "text"
    assert (
        call(client, model=model, messages=HI, thinking={"type": "adaptive"}).content[0].type
        == "thinking"
    )
    assert rejected(client, model=model, messages=HI, output_config={"effort": "xhigh"}) == (
        'output_config.effort: "xhigh" is not supported for this model.'
    )
    assert call(client, model=model, messages=HI, extra_body={"temperature": 0.0}).content


def test_sonnet_5_and_opus_5_take_disabled_and_forced_tools(
    client: anthropic.Anthropic, fake: FakeAnthropic
) -> None:
    off = call(
        client,
        model="claude-sonnet-5",
        messages=HI,
        thinking={"type": "disabled"},
        tool_choice={"type": "any"},
    )
    assert off.content[0].type == "text" and fake.requests[-1].thinking_tokens == 0
    assert rejected(
        client,
        model="claude-opus-5",
        messages=HI,
        thinking={"type": "disabled"},
        output_config={"effort": "max"},
    ).startswith('"thinking.type.disabled" is not supported with effort "max"')
    assert fake.requests[-1].effort == "max" and fake.requests[-1].thinking == {"type": "disabled"}
    assert (
        rejected(client, model="claude-sonnet-5", messages=HI, extra_body={"temperature": 1})
        == "`temperature` is deprecated for this model."
    )


def test_an_unknown_model_name_keeps_the_lenient_legacy_behaviour(
    client: anthropic.Anthropic, fake: FakeAnthropic
) -> None:
    reply = call(
        client,
        model="claude-test-1",
        messages=[*HI, {"role": "assistant", "content": "Sure"}],
        thinking={"type": "disabled"},
        extra_body={"temperature": 2},
    )
    assert [b.type for b in reply.content] == ["text", "tool_use", "tool_use"]
    assert reply.usage.output_tokens_details is None
    fake.set_responder(lambda request: Reply(text="Thought.", think=True, thinking="Scripted."))
    forced = call(client, model="m", messages=HI)
    assert blocks(forced)[0] == {
        "type": "thinking",
        "thinking": "Scripted.",
        "signature": blocks(forced)[0]["signature"],
    }
    fake.set_responder(lambda request: Reply(text="No.", think=False))
    assert [b.type for b in call(client, messages=HI).content] == ["text"]
