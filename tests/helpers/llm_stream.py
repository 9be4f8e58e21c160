"""The streamed LLM attempt against the fake API's SSE: the key, model, tools
and messages, the provider fixture, one call, a canned answer, and waiting for
the fake to see the client hang up. Import the fixtures with
tests/helpers/llm_fake.py's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.base import LlmReply
from fleet_agent.llm.model_table import DEFAULT_MODEL
from testkit.fakes import ErrorReply, FakeAnthropic, Reply
from tests.helpers import eventually

KEY = "sk-ant-api03-STREAMSECRET0123456789"
# The default model: it thinks (testkit/fakes/anthropic_models.py).
MODEL = DEFAULT_MODEL
TOOLS: list[dict[str, Any]] = [
    {
        "name": "create_instance",
        "description": "Rent one machine.",
        "input_schema": {"type": "object", "properties": {}},
    }
]
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Fleet below target."}]
OFFER = {"offer_id": 7, "reason": "cover a 120 proofs/h gap", "labels": ["a", "b"]}


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL)
    yield p
    await p.aclose()


async def call(provider: AnthropicProvider, **overrides: Any) -> LlmReply:
    kwargs: dict[str, Any] = {
        "system": "You manage a GPU fleet.",
        "messages": MESSAGES,
        "tools": TOOLS,
        "max_tokens": 1024,
    }
    kwargs.update(overrides)
    return await provider.complete(**kwargs)


def answer(reply: Reply | ErrorReply, fake: FakeAnthropic) -> None:
    fake.set_responder(lambda req: reply)


async def no_request_in_flight(fake: FakeAnthropic) -> None:
    async def idle() -> bool:
        return fake.in_flight == 0

    await eventually(idle, timeout=5, what="the fake to see the client hang up")
