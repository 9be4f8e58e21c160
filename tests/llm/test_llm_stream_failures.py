"""Slow, stalled, dropped and failing streams through the real anthropic client:
which are retryable and how they are classified; and the attempt's timeouts,
per read and grown with the output budget."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import anthropic
import httpx2
import pytest

from activities.llm_errors import to_application_error
from fleet_agent.llm.anthropic_errors import classify
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.base import LlmPermanentError, LlmRetryableError
from fleet_agent.llm.timing import (
    CHUNK_READ_TIMEOUT_SECONDS,
    LLM_HEARTBEAT_TIMEOUT,
    llm_attempt_timeout,
)
from testkit.fakes import ErrorReply, FakeAnthropic, Reply
from tests.helpers import eventually
from tests.helpers.llm_fake import fake, server
from tests.helpers.llm_stream import KEY, MODEL, answer, call, no_request_in_flight, provider

__all__ = ["fake", "provider", "server"]  # the fixtures, imported for pytest


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
