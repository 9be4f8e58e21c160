"""The fake Messages API seen through the real SDK only, for the tests of its
thinking: a responder with tool calls, the fake and SDK client fixtures (the
client overrides tests/conftest.py's), one call streamed or not, a refused
call's message, and the blocks of a tool-use cycle. Import the fixtures into
a test module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types import Message

from testkit.fakes import FakeAnthropic, Reply, Request

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
