"""The fake Messages API's event stream on the wire: the API's event sequence,
mid-stream errors, max_tokens bodies, refused requests, streams in flight."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from fleet_agent.llm.anthropic_provider import AnthropicProvider
from testkit.fakes import DEFAULT_TEXT, MID_STREAM_TEXT, FakeAnthropic, Reply
from tests.helpers.llm_fake import fake, server
from tests.helpers.llm_stream import MESSAGES, OFFER, TOOLS, answer, call, provider

__all__ = ["fake", "provider", "server"]  # the fixtures, imported for pytest


def _events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for block in response.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def _post_stream(fake: FakeAnthropic, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(
        fake.base_url + "/v1/messages",
        json={"model": "m", "max_tokens": 50, "messages": MESSAGES, "stream": True, **body},
        headers={"x-api-key": "k"},
        timeout=5,
    )


def test_fake_streams_the_api_event_sequence(fake: FakeAnthropic) -> None:
    answer(Reply(text="Hello there", tool_calls=[("create_instance", OFFER)], chunk_chars=4), fake)
    r = _post_stream(fake, {"tools": TOOLS})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert r.headers["request-id"].startswith("req_")
    events = _events(r)
    names = [name for name, _ in events]
    assert all(data["type"] == name for name, data in events)
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 2
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["id"].startswith("msg_") and start["role"] == "assistant"
    assert start["usage"]["input_tokens"] > 0
    deltas = [d["delta"] for n, d in events if n == "content_block_delta"]
    text = "".join(d["text"] for d in deltas if d["type"] == "text_delta")
    json_parts = [d["partial_json"] for d in deltas if d["type"] == "input_json_delta"]
    assert text == "Hello there" and len(json_parts) > 3 and json_parts[0] == ""
    assert json.loads("".join(json_parts)) == OFFER
    tool_start = next(d for n, d in events if n == "content_block_start" and d["index"] == 1)[
        "content_block"
    ]
    assert tool_start["type"] == "tool_use" and tool_start["input"] == {}
    final = events[-2][1]
    assert final["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert final["usage"]["output_tokens"] > 0
    assert fake.in_flight == 0


def test_fake_mid_stream_error_event(fake: FakeAnthropic) -> None:
    fake.fail_next(529, after_events=5)
    events = _events(_post_stream(fake, {}))
    names = [n for n, _ in events]
    delta = "content_block_delta"
    assert names == ["message_start", "content_block_start", "ping", delta, delta, "error"]
    assert events[-1][1]["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    text = "".join(d["delta"]["text"] for n, d in events if n == "content_block_delta")
    assert text and MID_STREAM_TEXT.startswith(text), "the interrupted reply had begun"
    fake.fail_next(529, after_events=6)  # a non-streaming request gets the HTTP error
    plain = httpx.post(
        fake.base_url + "/v1/messages",
        json={"model": "m", "max_tokens": 5, "messages": MESSAGES},
        headers={"x-api-key": "k"},
        timeout=5,
    )
    assert plain.status_code == 529
    after = _events(_post_stream(fake, {}))
    text = "".join(d["delta"].get("text", "") for n, d in after if n == "content_block_delta")
    assert text == DEFAULT_TEXT, "the queued failure was used up"


def test_fake_non_streaming_max_tokens_body_has_the_complete_keys(fake: FakeAnthropic) -> None:
    answer(
        Reply(tool_calls=[("create_instance", OFFER)], stop_reason="max_tokens", cut_json_at=30),
        fake,
    )
    r = httpx.post(
        fake.base_url + "/v1/messages",
        json={"model": "m", "max_tokens": 5, "messages": MESSAGES, "tools": TOOLS},
        headers={"x-api-key": "k"},
        timeout=5,
    )
    data = r.json()
    assert data["stop_reason"] == "max_tokens"
    assert data["content"][0]["input"] == {"offer_id": 7}


@pytest.mark.parametrize(
    ("messages", "fragment"),
    [
        (
            [*MESSAGES, {"role": "assistant", "content": "Half an answer "}],
            "final assistant content cannot end with trailing whitespace",
        ),
        (
            [*MESSAGES, {"role": "assistant", "content": [{"type": "text", "text": "Half\n"}]}],
            "final assistant content cannot end with trailing whitespace",
        ),
    ],
)
def test_fake_refuses_a_final_assistant_message_ending_in_whitespace(
    fake: FakeAnthropic, messages: list[dict[str, Any]], fragment: str
) -> None:
    r = _post_stream(fake, {"messages": messages})
    assert r.status_code == 400 and fragment in r.json()["error"]["message"]
    ok = _post_stream(fake, {"messages": [*MESSAGES, {"role": "assistant", "content": "Half"}]})
    assert ok.status_code == 200


def test_fake_refuses_a_non_boolean_stream_flag(fake: FakeAnthropic) -> None:
    r = _post_stream(fake, {"stream": "yes"})
    assert r.status_code == 400 and "stream" in r.json()["error"]["message"]


async def test_fake_counts_streams_in_flight_until_their_last_event(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    answer(Reply(text="y" * 20, chunk_chars=4, chunk_delay=0.05), fake)
    await asyncio.gather(*(call(provider) for _ in range(5)))
    assert len(fake.requests) == 5
    assert fake.max_concurrent == 5
    assert fake.in_flight == 0
