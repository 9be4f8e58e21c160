"""The Anthropic provider's configuration: base URL and model from the
environment, the pinned default model, the provider protocol."""

from __future__ import annotations

import typing
from typing import Literal

import anthropic
import pytest

from fleet_agent.llm import anthropic_provider as provider_module
from fleet_agent.llm.anthropic_provider import AnthropicProvider, default_model
from fleet_agent.llm.base import LlmProvider
from testkit.fakes import DEFAULT_TEXT, FakeAnthropic
from tests.helpers.llm_fake import fake, server
from tests.helpers.llm_provider import KEY, call

__all__ = ["fake", "server"]  # the fixtures, imported for pytest


async def test_base_url_from_env_when_none(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    p = AnthropicProvider(model="m")
    try:
        assert p.base_url.rstrip("/") == fake.base_url
        reply = await call(p)
    finally:
        await p.aclose()
    assert reply.text == DEFAULT_TEXT
    assert len(fake.requests) == 1
    headers = fake.requests[0].headers
    assert KEY in (headers.get("x-api-key", "") + headers.get("authorization", ""))


async def test_model_from_env_and_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_LLM_MODEL", "claude-from-env")
    p = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    assert p.model == "claude-from-env"
    q = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9", model="claude-arg")
    assert q.model == "claude-arg"
    monkeypatch.delenv("FLEET_LLM_MODEL")
    r = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9")
    assert r.model == default_model()
    for x in (p, q, r):
        await x.aclose()


def _sdk_model_names() -> list[str]:
    names: list[str] = []
    for arg in typing.get_args(anthropic.types.Model):
        if typing.get_origin(arg) is Literal:
            names += [n for n in typing.get_args(arg) if isinstance(n, str)]
    return names


def test_the_default_model_is_pinned_and_known_to_the_sdk() -> None:
    # A fixed, documented name (docs/DECISIONS.md): not whatever comes first
    # in the SDK's list.
    assert default_model() == "claude-sonnet-5-5" == provider_module.DEFAULT_MODEL
    assert default_model() in _sdk_model_names(), "a name the installed SDK knows"


def test_an_sdk_upgrade_does_not_change_the_default_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    newer = typing.Union[Literal["claude-sonnet-9-9", "claude-sonnet-5-5"], str]  # noqa: UP007
    monkeypatch.setattr(anthropic.types, "Model", newer)
    monkeypatch.delenv("FLEET_LLM_MODEL", raising=False)
    assert default_model() == "claude-sonnet-5-5"
    assert AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9").model == (
        "claude-sonnet-5-5"
    )


def test_provider_satisfies_protocol() -> None:
    p = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9", model="m")
    assert isinstance(p, LlmProvider)
    assert p.name == "anthropic"
    assert p._client.max_retries == 0
    assert KEY not in repr(p)
