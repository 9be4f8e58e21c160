"""The Anthropic provider against the fake Messages API: its key, model, system
prompt, tools and messages, the provider fixture, one call, and the check that
an error never shows the key. Import the fixtures with tests/helpers/llm_fake.py's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.base import LlmReply
from fleet_agent.llm.model_table import DEFAULT_MODEL
from testkit.fakes import FakeAnthropic

KEY = "sk-ant-api03-TESTSECRET0123456789abcdef"
# The default model: it thinks (testkit/fakes/anthropic_models.py).
MODEL = DEFAULT_MODEL
SYSTEM = "You manage a GPU fleet."
TOOLS: list[dict[str, Any]] = [
    {
        "name": "list_instances",
        "description": "List rented instances.",
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "destroy_instance",
        "description": "Destroy one instance.",
        "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
]
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Heartbeat. Anything to do?"}]


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=5.0)
    yield p
    await p.aclose()


async def call(provider: AnthropicProvider, **overrides: Any) -> LlmReply:
    kwargs: dict[str, Any] = {
        "system": SYSTEM,
        "messages": MESSAGES,
        "tools": TOOLS,
        "max_tokens": 1024,
    }
    kwargs.update(overrides)
    return await provider.complete(**kwargs)


def assert_clean(err: BaseException) -> None:
    """The key appears nowhere a log or a Temporal failure would show."""
    assert KEY not in str(err)
    assert KEY not in repr(err)
    cause = err.__cause__
    while cause is not None:
        assert KEY not in str(cause)
        cause = cause.__cause__
