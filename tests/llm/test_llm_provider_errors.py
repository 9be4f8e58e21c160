"""The Anthropic provider's errors over HTTP: client errors permanent, server
errors and rate limits retryable (with their delay), spend limits permanent,
refused and slow connections, and the key in no error string."""

from __future__ import annotations

import time

import pytest

from activities.llm_errors import to_application_error
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.base import LlmPermanentError, LlmRetryableError
from testkit.fakes import DEFAULT_TEXT, FakeAnthropic
from tests.helpers import eventually
from tests.helpers.llm_fake import fake, server
from tests.helpers.llm_provider import KEY, MODEL, assert_clean, call, provider

__all__ = ["fake", "provider", "server"]  # the fixtures, imported for pytest


@pytest.mark.parametrize(
    ("status", "error_type"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (422, "invalid_request_error"),
    ],
)
async def test_client_errors_are_permanent(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int, error_type: str
) -> None:
    fake.fail_next(status, message=f"boom {status}")
    with pytest.raises(LlmPermanentError) as info:
        await call(provider)
    err = info.value
    assert err.status == status
    assert str(status) in str(err) and error_type in str(err) and f"boom {status}" in str(err)
    assert "request-id req_" in str(err)
    assert len(fake.requests) == 1  # the SDK made exactly one attempt
    assert_clean(err)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
async def test_server_errors_are_retryable(
    fake: FakeAnthropic, provider: AnthropicProvider, status: int
) -> None:
    fake.fail_next(status, times=3)
    with pytest.raises(LlmRetryableError) as info:
        await call(provider)
    assert info.value.status == status
    assert info.value.retry_after is None
    assert len(fake.requests) == 1  # max_retries=0: no SDK retry
    assert fake.pending_failures == 2
    assert_clean(info.value)


async def test_overloaded_message_is_clear(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(529)
    with pytest.raises(LlmRetryableError, match=r"HTTP 529 overloaded_error: Overloaded"):
        await call(provider)


async def test_rate_limit_with_retry_after(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(429, headers={"retry-after": "7"})
    with pytest.raises(LlmRetryableError) as info:
        await call(provider)
    assert info.value.retry_after == 7
    assert info.value.status == 429
    assert "rate_limit_error" in str(info.value) and "retry after 7s" in str(info.value)
    assert len(fake.requests) == 1


async def test_rate_limit_with_retry_after_ms(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(429, headers={"retry-after-ms": "1500", "retry-after": "2"})
    with pytest.raises(LlmRetryableError) as info:
        await call(provider)
    assert info.value.retry_after == 1.5


@pytest.mark.parametrize(
    ("message", "error_code"),
    [
        ("You have reached your spend limit for this month.", None),
        ("Your credit balance is too low to access the Anthropic API.", None),
        ("Please check your plan and billing details.", None),
        ("Request refused.", "enforced_spend_limit_reached"),
        ("Request refused.", "contract_spend_limit_reached"),
    ],
)
async def test_spend_limit_429_is_permanent(
    fake: FakeAnthropic, provider: AnthropicProvider, message: str, error_code: str | None
) -> None:
    fake.fail_next(429, message=message, error_code=error_code, headers={"retry-after": "60"})
    with pytest.raises(LlmPermanentError) as info:
        await call(provider)
    assert info.value.status == 429
    assert "spend/credit limit" in str(info.value)
    assert len(fake.requests) == 1


async def test_billing_error_type_is_permanent(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(400, error_type="billing_error", message="Your credit balance is too low.")
    with pytest.raises(LlmPermanentError, match="billing_error"):
        await call(provider)


async def test_plain_429_without_retry_after(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    fake.fail_next(429)
    with pytest.raises(LlmRetryableError) as info:
        await call(provider)
    assert info.value.retry_after is None


async def test_connection_refused_is_retryable() -> None:
    fake = FakeAnthropic().start()
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=5.0)
    try:
        await call(p)  # leaves a pooled keep-alive connection behind
        fake.stop()
        with pytest.raises(LlmRetryableError) as info:
            await call(p)
        assert info.value.status is None
        assert "connection error" in str(info.value).lower()
        assert_clean(info.value)
        # a fresh client: nothing listens at all
        fresh = AnthropicProvider(
            api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=5.0
        )
        with pytest.raises(LlmRetryableError, match=r"(?i)connect"):
            await call(fresh)
        await fresh.aclose()
        # the fake can come back on the same port
        fake.start()
        assert (await call(p)).text == DEFAULT_TEXT
        assert len(fake.requests) == 2
    finally:
        fake.stop()
        await p.aclose()


async def test_slow_server_times_out_as_retryable(fake: FakeAnthropic) -> None:
    # The reply would come after a minute: a call that ends with a timeout
    # gave up long before, at its own read timeout, and did not retry.
    fake.latency = 60.0
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL, read_timeout=0.4)
    try:
        started = time.monotonic()
        with pytest.raises(LlmRetryableError, match="timed out") as info:
            await call(p)
        elapsed = time.monotonic() - started
    finally:
        await p.aclose()
    assert elapsed < fake.latency, "the SDK waited for the reply (ignored the timeout)"
    assert len(fake.requests) == 1, "the SDK retried"
    assert info.value.retry_after is None

    # the fake notices the client hung up and stops counting the request as in flight
    async def hung_up() -> bool:
        return not fake.in_flight

    await eventually(hung_up, what="the fake to see the client hang up")


async def test_validation_error_from_fake_reaches_caller(
    fake: FakeAnthropic, provider: AnthropicProvider
) -> None:
    bad = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(LlmPermanentError, match="roles must alternate"):
        await call(provider, messages=bad)


async def test_key_never_in_error_strings(fake: FakeAnthropic, provider: AnthropicProvider) -> None:
    # a (misbehaving) proxy echoes the key back in the error message
    fake.fail_next(401, message=f"invalid x-api-key: {KEY}")
    with pytest.raises(LlmPermanentError) as info:
        await call(provider)
    assert "[REDACTED]" in str(info.value)
    assert info.value.__cause__ is None  # the SDK error carrying the key is not chained
    assert_clean(info.value)
    app_err = to_application_error(info.value)
    assert KEY not in str(app_err)
    # the same for a retryable error, and a key-shaped string that is not our key
    other = "sk-ant-api03-SOMEONEELSESKEY999"
    fake.fail_next(500, message=f"upstream said {KEY} and {other}")
    with pytest.raises(LlmRetryableError) as info2:
        await call(provider)
    assert_clean(info2.value)
    assert other not in str(info2.value)
