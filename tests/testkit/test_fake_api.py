"""The fake Messages API itself (testkit/fakes): the success shape, validation
like the real API, auth and count_tokens, injected failures, the request
helpers, and concurrency tracking."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from fleet_agent.llm.anthropic_provider import AnthropicProvider
from testkit.fakes import ErrorReply, FakeAnthropic, Reply, Request
from tests.helpers.llm_fake import fake, server
from tests.helpers.llm_provider import TOOLS, call, provider

__all__ = ["fake", "provider", "server"]  # the fixtures, imported for pytest


def _post(
    fake: FakeAnthropic, body: Any, *, auth: bool = True, path: str = "/v1/messages"
) -> httpx.Response:
    headers = {"x-api-key": "k"} if auth else {}
    return httpx.post(fake.base_url + path, json=body, headers=headers, timeout=5)


GOOD = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


def test_fake_success_shape(fake: FakeAnthropic) -> None:
    fake.set_responder(lambda req: Reply(text="t", tool_calls=[("list_instances", {"a": 1})]))
    r = _post(fake, {**GOOD, "tools": TOOLS})
    assert r.status_code == 200
    assert r.headers["request-id"].startswith("req_")
    data = r.json()
    assert data["id"].startswith("msg_") and data["type"] == "message"
    assert data["role"] == "assistant" and data["model"] == "m"
    assert data["stop_reason"] == "tool_use" and data["stop_sequence"] is None
    assert data["content"][0] == {"type": "text", "text": "t"}
    assert data["content"][1]["id"].startswith("toolu_")
    assert set(data["usage"]) == {"input_tokens", "output_tokens"}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"max_tokens": 10, "messages": GOOD["messages"]}, "model: Field required"),
        ({"model": "m", "max_tokens": 10}, "messages: Field required"),
        ({"model": "m", "messages": GOOD["messages"]}, "max_tokens: Field required"),
        ({**GOOD, "messages": []}, "at least one message"),
        ({**GOOD, "messages": [{"role": "assistant", "content": "x"}]}, "first message"),
        (
            {
                **GOOD,
                "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            },
            "roles must alternate",
        ),
        ({**GOOD, "messages": [{"role": "user", "content": ""}]}, "non-empty content"),
        (
            {**GOOD, "messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]},
            "non-empty",
        ),
        (
            {
                **GOOD,
                "messages": [
                    {"role": "user", "content": "go"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
                    },
                    {"role": "user", "content": "where is my result?"},
                ],
            },
            "without `tool_result` blocks",
        ),
        (
            {
                **GOOD,
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "r"}],
                    }
                ],
            },
            "unexpected `tool_use_id`",
        ),
        ({**GOOD, "tools": [TOOLS[0], TOOLS[0]]}, "Tool names must be unique"),
        ({**GOOD, "max_tokens": 0}, "greater than or equal to 1"),
    ],
)
def test_fake_validates_like_the_api(
    fake: FakeAnthropic, body: dict[str, Any], fragment: str
) -> None:
    r = _post(fake, body)
    assert r.status_code == 400, r.text
    assert r.json()["type"] == "error"
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert fragment in r.json()["error"]["message"]
    assert len(fake.requests) == 1


def test_fake_requires_auth_and_answers_count_tokens(fake: FakeAnthropic) -> None:
    r = _post(fake, GOOD, auth=False)
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    counted = _post(
        fake, {"model": "m", "messages": GOOD["messages"]}, path="/v1/messages/count_tokens"
    )
    assert counted.status_code == 200 and counted.json()["input_tokens"] >= 1
    assert len(fake.requests) == 1 and len(fake.count_tokens_requests) == 1
    assert _post(fake, GOOD, path="/v1/nope").status_code == 404


def test_fake_fail_next_and_responder_errors(fake: FakeAnthropic) -> None:
    fake.fail_next(503, times=2, headers={"retry-after": "4"})
    first = _post(fake, GOOD)
    assert first.status_code == 503 and first.headers["retry-after"] == "4"
    assert first.json()["error"]["type"] == "api_error"
    assert _post(fake, GOOD).status_code == 503
    assert _post(fake, GOOD).status_code == 200

    def broken(req: Request) -> Reply:
        raise RuntimeError("responder bug")

    fake.set_responder(broken)
    r = _post(fake, GOOD)
    assert r.status_code == 500 and "responder bug" in r.json()["error"]["message"]
    assert len(fake.responder_errors) == 1
    fake.set_responder(lambda req: ErrorReply(429, message="slow", headers={"retry-after": "1"}))
    assert _post(fake, GOOD).status_code == 429
    assert len(fake.requests) == 5


def test_request_helpers() -> None:
    req = Request(
        body={
            "system": [{"type": "text", "text": "sys A"}, {"type": "text", "text": "sys B"}],
            "tools": TOOLS,
            "messages": [
                {"role": "user", "content": "first question"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "checking"},
                        {
                            "type": "tool_use",
                            "id": "t1",
                            "name": "list_instances",
                            "input": {"q": 1},
                        },
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "2 up"}],
                        },
                        {"type": "text", "text": "and now?"},
                    ],
                },
            ],
        }
    )
    assert req.system_text() == "sys A\nsys B"
    assert req.last_user_text() == "2 up\nand now?"
    assert req.tool_names() == ["list_instances", "destroy_instance"]
    everything = req.all_text()
    for piece in (
        "sys A",
        "first question",
        "checking",
        "list_instances",
        '"q": 1',
        "2 up",
        "and now?",
    ):
        assert piece in everything
    assert req.tool_results()[0]["tool_use_id"] == "t1"


async def test_fake_tracks_concurrency(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    fake.latency = 0.3
    await asyncio.gather(*(call(provider) for _ in range(5)))
    assert len(fake.requests) == 5
    assert fake.max_concurrent == 5
    assert fake.in_flight == 0
