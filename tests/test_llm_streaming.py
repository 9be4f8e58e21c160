"""The streamed LLM attempt: the real anthropic client against the fake API's SSE.

Stop reasons, replies cut by max_tokens, slow, stalled, dropped and failing
streams, progress reports; and the fake's event stream itself on the wire.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import anthropic
import httpx
import httpx2
import pytest

from activities.llm_errors import to_application_error
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.base import LlmOptions, LlmPermanentError, LlmReply, LlmRetryableError
from fleet_agent.llm.classify import classify
from fleet_agent.llm.model_table import DEFAULT_MODEL
from fleet_agent.llm.timing import (
    CHUNK_READ_TIMEOUT_SECONDS,
    LLM_HEARTBEAT_TIMEOUT,
    llm_attempt_timeout,
)
from fleet_agent.llm.transcript import StoredReply, api_messages, dumps, tool_calls_of
from testkit.fakes import DEFAULT_TEXT, MID_STREAM_TEXT, ErrorReply, FakeAnthropic, Reply
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


@pytest.fixture(scope="module")
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeAnthropic) -> FakeAnthropic:
    server.clear()
    server.set_responder(None)
    server.latency = 0.0
    return server


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


# ---------------------------------------------------------------- replies


async def test_streamed_text_reports_progress_up_to_the_whole_text(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    text = "All quiet on the fleet. " * 10
    answer(Reply(text=text, chunk_chars=7, redacted=False), fake)
    seen: list[int] = []
    reply = await call(provider, on_progress=seen.append)
    assert [b["type"] for b in reply.content] == ["thinking", "text"]
    assert reply.content[-1] == {"type": "text", "text": text}
    assert reply.stop_reason == "end_turn" and reply.model == MODEL
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
    assert fake.requests[0].stream and len(fake.requests) == 1
    assert seen[0] == 0, "reported once the response starts, before any text"
    # The thinking is omitted (the default display): only the text streams.
    assert seen == sorted(seen) and seen[-1] == len(text)
    assert len(set(seen)) > len(text) // 7, "one step per delta"


async def test_streamed_summarised_thinking_counts_as_progress(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    """A model thinking for minutes is alive: its thinking deltas are progress."""
    thought = "The fleet holds the target; nothing to rent. " * 5
    answer(Reply(text="Fine.", thinking=thought, chunk_chars=9), fake)
    seen: list[int] = []
    options = LlmOptions(thinking_display="summarized")
    reply = await call(provider, on_progress=seen.append, options=options)
    assert reply.content[0]["thinking"] == thought and reply.content[0]["signature"]
    assert seen == sorted(seen) and seen[-1] == len(thought) + len("Fine.")
    assert len([n for n in set(seen) if n <= len(thought)]) > len(thought) // 9


async def test_streamed_tool_use_input_arrives_whole_from_many_json_chunks(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    answer(
        Reply(
            text="Renting.", tool_calls=[("create_instance", OFFER)], chunk_chars=3, redacted=False
        ),
        fake,
    )
    seen: list[int] = []
    reply = await call(provider, on_progress=seen.append)
    assert reply.stop_reason == "tool_use"
    assert [b["type"] for b in reply.content] == ["thinking", "text", "tool_use"]
    (use,) = reply.tool_uses
    assert use["input"] == OFFER and use["name"] == "create_instance"
    assert use["id"].startswith("toolu_")
    assert seen[-1] == len("Renting.") + len(json.dumps(OFFER))


@pytest.mark.parametrize(
    "stop_reason",
    [
        "end_turn",
        "tool_use",
        "max_tokens",
        "stop_sequence",
        "pause_turn",
        "refusal",
        "model_context_window_exceeded",
        "a_stop_reason_from_the_future",
    ],
)
async def test_every_stop_reason_is_returned_as_sent(
    fake: FakeAnthropic, provider: AnthropicProvider, stop_reason: str
) -> None:
    answer(Reply(text="Partial thought", stop_reason=stop_reason), fake)
    reply = await call(provider)
    assert reply.stop_reason == stop_reason
    assert reply.text == "Partial thought"


async def test_max_tokens_inside_a_tool_call_keeps_the_complete_part_of_its_input(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    full = json.dumps(OFFER)
    cut = full.index("proofs")  # inside the "reason" string
    answer(
        Reply(
            text="Renting two.",
            tool_calls=[("create_instance", {"offer_id": 3}), ("create_instance", OFFER)],
            stop_reason="max_tokens",
            cut_json_at=cut,
            chunk_chars=5,
        ),
        fake,
    )
    reply = await call(provider)
    assert reply.stop_reason == "max_tokens"
    first, second = reply.tool_uses
    assert first["input"] == {"offer_id": 3}, "the calls before the cut are whole"
    assert second["input"] == {"offer_id": 7}, "the cut call keeps its complete keys"
    calls = tool_calls_of(reply.content)
    assert [c.input for c in calls] == [{"offer_id": 3}, {"offer_id": 7}]
    # It can be stored and sent back as the assistant turn of a conversation.
    stored = StoredReply(content=reply.content, stop_reason=reply.stop_reason, model=reply.model)
    back = api_messages([(0, "Fleet below target."), (1, dumps(stored))])
    assert back[1] == {"role": "assistant", "content": reply.content}


async def test_max_tokens_before_any_tool_input_gives_an_empty_input(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    answer(
        Reply(tool_calls=[("create_instance", OFFER)], stop_reason="max_tokens", cut_json_at=0),
        fake,
    )
    reply = await call(provider)
    assert reply.stop_reason == "max_tokens"
    assert reply.tool_uses[0]["input"] == {}
    assert tool_calls_of(reply.content)[0].input == {}


async def test_a_conversation_ending_with_an_assistant_message_is_never_sent(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    """A prefill, which Sonnet 5.5 refuses with a 400: the provider refuses it
    first, as permanent, and sends nothing."""
    paused = [*MESSAGES, {"role": "assistant", "content": [{"type": "text", "text": "Half"}]}]
    with pytest.raises(LlmPermanentError, match="prefill"):
        await call(provider, messages=paused)
    assert fake.requests == []


# ---------------------------------------------------------------- slow and broken streams


async def test_read_timeout_bounds_the_gap_between_chunks_not_the_whole_reply(
    fake: FakeAnthropic,
) -> None:
    # 40+ events 0.1 s apart take over 4 s; no gap comes near the 1 s read timeout.
    answer(Reply(text="x" * 80, chunk_chars=2, chunk_delay=0.1), fake)
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=1.0)
    try:
        reply = await call(p)
    finally:
        await p.aclose()
    assert reply.text == "x" * 80 and reply.stop_reason == "end_turn"


async def test_a_stalled_stream_fails_as_a_retryable_timeout(fake: FakeAnthropic) -> None:
    answer(Reply(text="x" * 60, chunk_chars=4, stall_after=5), fake)
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=0.5)
    seen: list[int] = []
    try:
        with pytest.raises(LlmRetryableError, match="stream stalled") as info:
            await call(p, on_progress=seen.append)
    finally:
        await p.aclose()
    assert seen and seen[-1] < 60, "it failed mid-stream, after some text"
    assert len(fake.requests) == 1, "one attempt: Temporal retries, not the SDK"
    assert not to_application_error(info.value).non_retryable
    await no_request_in_flight(fake)


async def test_a_connection_dropped_mid_stream_is_retryable() -> None:
    fake = FakeAnthropic().start()
    fake.set_responder(lambda req: Reply(text="x" * 60, chunk_chars=4, stall_after=5))
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=30)
    try:
        task = asyncio.create_task(call(p))

        async def streaming() -> bool:
            return fake.in_flight == 1

        await eventually(streaming, what="the stream to start")
        fake.stop()
        with pytest.raises(LlmRetryableError, match="while streaming"):
            await task
    finally:
        fake.stop()
        await p.aclose()


async def test_a_stream_that_ends_before_message_stop_is_retryable(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    answer(Reply(text="x" * 40, chunk_chars=4, end_after=6), fake)
    with pytest.raises(LlmRetryableError, match="before message_stop"):
        await call(provider)


async def test_a_mid_stream_overloaded_error_is_retryable_as_529(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(529, after_events=4)
    seen: list[int] = []
    with pytest.raises(LlmRetryableError) as info:
        await call(provider, on_progress=seen.append)
    err = info.value
    assert err.status == 529
    assert "stream failed mid-way with overloaded_error: Overloaded" in str(err)
    assert seen[-1] > 0, "the error came after text had arrived"
    assert KEY not in str(err)
    app = to_application_error(err)
    assert app.type == "LlmRetryable" and not app.non_retryable
    assert (await call(provider)).stop_reason == "end_turn", "the next attempt succeeds"
    assert len(fake.requests) == 2


@pytest.mark.parametrize(
    ("status", "error_type", "permanent", "as_status"),
    [
        (500, None, False, 500),
        (429, None, False, 429),
        (400, None, True, 400),
        (400, "billing_error", True, 402),
        (500, "some_new_error", False, 500),
    ],
)
async def test_mid_stream_errors_are_classified_by_their_type(
    fake: FakeAnthropic,
    provider: AnthropicProvider,
    status: int,
    error_type: str | None,
    permanent: bool,
    as_status: int,
) -> None:
    answer(ErrorReply(status, error_type=error_type, after_events=2), fake)
    with pytest.raises(LlmPermanentError if permanent else LlmRetryableError) as info:
        await call(provider)
    assert info.value.status == as_status


async def test_an_error_from_the_progress_callback_is_not_an_api_error(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    def broken(chars: int) -> None:
        if chars:
            raise KeyError("bug in the caller")

    with pytest.raises(KeyError, match="bug in the caller"):
        await call(provider, on_progress=broken)


def test_classify_stream_transport_errors() -> None:
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    stalled = classify(httpx2.ReadTimeout("timed out", request=request))
    assert isinstance(stalled, LlmRetryableError) and "stalled" in str(stalled)
    dropped = classify(httpx2.RemoteProtocolError("peer closed connection", request=request))
    assert isinstance(dropped, LlmRetryableError) and "while streaming" in str(dropped)


def test_classify_an_sse_error_event_by_its_type() -> None:
    request = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    response = httpx2.Response(200, request=request)

    def event(error_type: str) -> anthropic.APIStatusError:
        body = {"type": "error", "error": {"type": error_type, "message": "m"}}
        return anthropic.APIStatusError(str(body), response=response, body=body)

    err = classify(event("overloaded_error"))
    assert isinstance(err, LlmRetryableError) and err.status == 529
    err = classify(event("invalid_request_error"))
    assert isinstance(err, LlmPermanentError) and err.status == 400


# ---------------------------------------------------------------- timing


def test_attempt_timeout_grows_with_the_output_budget() -> None:
    small, default, largest = (llm_attempt_timeout(n) for n in (256, 4_096, 64_000))
    assert small < default < largest
    assert default == timedelta(seconds=425)
    assert largest == timedelta(seconds=3_420)
    # Even the smallest budget leaves room for one full read timeout of silence
    # before the first token, and a dead worker is noticed long before that.
    assert small > timedelta(seconds=CHUNK_READ_TIMEOUT_SECONDS) > LLM_HEARTBEAT_TIMEOUT
    with pytest.raises(ValueError, match="at least 1"):
        llm_attempt_timeout(0)


def test_provider_timeout_is_per_read_with_no_whole_call_limit() -> None:
    p = AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9", model="m")
    assert p.timeout.read == CHUNK_READ_TIMEOUT_SECONDS
    assert p.timeout.connect is not None and p.timeout.connect < p.timeout.read
    assert p._client.max_retries == 0


# ---------------------------------------------------------------- the fake on the wire


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
