"""The fake Messages API thinks like the real models (testkit/fakes/anthropic_models.py,
anthropic_thinking.py, anthropic_signatures.py), seen through the real SDK
only — streaming and not — never through our provider."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types import Message

from testkit.fakes import FakeAnthropic, Reply, Request
from testkit.fakes.anthropic_signatures import BOUND_ELSEWHERE, INVALID_SIGNATURE
from testkit.fakes.anthropic_thinking import THINKING_TOKENS

KEY = "sk-ant-test-thinking"
SONNET_55 = "claude-sonnet-5-5"
TOOLS = [
    {"name": "list_instances", "description": "List.", "input_schema": {"type": "object"}},
    {"name": "get_prices", "description": "Prices.", "input_schema": {"type": "object"}},
]
CALLS = [("list_instances", {}), ("get_prices", {"region": "eu"})]
STREAM = pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])


def respond(request: Request) -> Reply:
    """Two tool calls (and a redacted_thinking block) first, then one more
    call if the first results were long; an answer after results."""
    results = request.tool_results()
    if results and len(str(request.messages[2]["content"])) > 1_000 and len(request.messages) < 5:
        return Reply(text="One more.", tool_calls=[CALLS[1]])
    if results:
        return Reply(text="All good.")
    return Reply(text="Checking.", tool_calls=list(CALLS), redacted=True)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(respond, redacted_every=0) as server:
        yield server


@pytest.fixture
def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url, api_key=KEY, max_retries=0)


def call(client: anthropic.Anthropic, *, stream: bool = False, **kwargs: Any) -> Message:
    kwargs.setdefault("model", SONNET_55)
    kwargs.setdefault("max_tokens", 8_000)
    kwargs.setdefault("tools", TOOLS)
    if stream:
        with client.messages.stream(**kwargs) as events:
            streamed: Message = events.get_final_message()
            return streamed
    message: Message = client.messages.create(**kwargs)
    return message


def rejected(client: anthropic.Anthropic, *, stream: bool = False, **kwargs: Any) -> str:
    """The message of the 400 the request gets."""
    with pytest.raises(anthropic.BadRequestError) as caught:
        call(client, stream=stream, **kwargs)
    body = caught.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


def blocks(message: Message) -> list[dict[str, Any]]:
    return [b.to_dict() for b in message.content]


def results(content: list[dict[str, Any]], text: str = "ok") -> dict[str, Any]:
    uses = [b["id"] for b in content if b["type"] == "tool_use"]
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": u, "content": text} for u in uses],
    }


def cycle(client: anthropic.Anthropic, stream: bool = False) -> list[dict[str, Any]]:
    """A user message, the reply with tool calls, and the tool results: the
    messages of the request that continues the cycle."""
    first = [{"role": "user", "content": "Check the fleet."}]
    reply = call(client, stream=stream, messages=first)
    return [*first, {"role": "assistant", "content": blocks(reply)}, results(blocks(reply))]


def shape(message: Message) -> list[tuple[Any, ...]]:
    """The content without what is random (ids, signatures, data), but with lengths."""
    out: list[tuple[Any, ...]] = []
    for b in blocks(message):
        kind = b["type"]
        if kind == "thinking":
            out.append((kind, b["thinking"], len(b["signature"])))
        elif kind == "redacted_thinking":
            out.append((kind, len(b["data"])))
        elif kind == "tool_use":
            out.append((kind, b["name"], b["input"]))
        else:
            out.append((kind, b["text"]))
    return out


# ---------------------------------------------------------------- replies


@STREAM
def test_a_thinking_reply_has_thinking_between_tool_calls_and_a_redacted_block(
    client: anthropic.Anthropic, fake: FakeAnthropic, stream: bool
) -> None:
    reply = call(client, stream=stream, messages=[{"role": "user", "content": "Check."}])
    assert [b["type"] for b in blocks(reply)] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
        "thinking",
        "tool_use",
    ]
    first = blocks(reply)[0]
    assert first["thinking"] == ""  # Sonnet 5.5's default display is "omitted"
    assert len(first["signature"]) >= 100
    thinking = THINKING_TOKENS["high"]  # the default effort
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
        assert len(texts) == 2 and all((t == "") == empty for t in texts)
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


# ---------------------------------------------------------------- passing thinking back


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
    readable = altered(messages, lambda c: c.__setitem__(slice(None), c[2:4] + c[5:]))
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


# ---------------------------------------------------------------- settings per model


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
    assert kinds == ["text", "tool_use", "thinking", "redacted_thinking", "tool_use"]
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
