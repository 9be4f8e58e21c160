"""The fake Messages API's prompt cache accounts like the real one
(testkit/fakes/anthropic_cache.py), seen through the real SDK and provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.base import LlmPermanentError
from fleet_agent.models import TokenUsage
from testkit.fakes import FakeAnthropic
from testkit.fakes.anthropic_cache import LOOKBACK_BLOCKS

KEY = "sk-ant-test"
MODEL = "claude-sonnet-5-5"
LONG = "The fleet's standing instructions. " * 200  # ≈ 7,000 characters: over 1,024 tokens
ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}
FIVE_MIN = {"type": "ephemeral"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake(clock: Clock) -> Iterator[FakeAnthropic]:
    with FakeAnthropic(clock=clock) as server:
        yield server


@pytest.fixture
async def provider(fake: FakeAnthropic) -> AsyncIterator[AnthropicProvider]:
    p = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model=MODEL)
    yield p
    await p.aclose()


def system(marker: dict[str, str] | None = ONE_HOUR, text: str = LONG) -> list[dict[str, Any]]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marker is not None:
        block["cache_control"] = marker
    return [block]


def user(text: str, marker: dict[str, str] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if marker is not None:
        block["cache_control"] = marker
    return {"role": "user", "content": [block]}


def turns(n: int) -> list[dict[str, Any]]:
    """n user/assistant exchanges (2n messages, one block each)."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        out += [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": "ok"},
        ]
    return out


async def ask(
    provider: AnthropicProvider, messages: list[dict[str, Any]], sys: Any = None
) -> TokenUsage:
    reply = await provider.complete(
        system=system() if sys is None else sys, messages=messages, tools=[], max_tokens=50
    )
    return reply.usage


def reported(fake: FakeAnthropic) -> dict[str, Any]:
    usage = fake.requests[-1].usage
    assert usage is not None
    return usage


async def test_first_request_writes_and_the_same_prefix_is_read_next(
    provider: AnthropicProvider, fake: FakeAnthropic
) -> None:
    first = await ask(provider, [user("hello")])
    assert first.cache_read_input_tokens == 0
    assert first.cache_creation_input_tokens == first.cache_creation_1h_input_tokens > 1024
    body = reported(fake)
    assert body["cache_creation"]["ephemeral_1h_input_tokens"] == first.cache_creation_input_tokens
    second = await ask(provider, [user("something else")])
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0
    # input_tokens is the uncached rest; the three add up to the prompt.
    assert second.prompt_tokens == second.input_tokens + second.cache_read_input_tokens
    assert 0 < second.input_tokens < 100  # the request's framing, and "something else"


async def test_a_breakpoint_on_the_newest_message_reads_the_previous_round_back(
    provider: AnthropicProvider, fake: FakeAnthropic
) -> None:
    history = [*turns(3), user("round one", FIVE_MIN)]
    one = await ask(provider, history)
    assert one.cache_creation_input_tokens > 0 and one.cache_read_input_tokens == 0
    one_prompt = one.prompt_tokens
    # The next round: the same messages (the marker moved on) plus two more.
    history[-1] = user("round one")
    two = await ask(
        provider, [*history, {"role": "assistant", "content": "done"}, user("round two", FIVE_MIN)]
    )
    # Found 2 blocks back (the lookback), read whole; only the new part written.
    assert two.cache_read_input_tokens == one.cache_creation_input_tokens
    assert 0 < two.cache_creation_input_tokens < 50
    assert two.cache_creation_1h_input_tokens == 0, "the last breakpoint is a 5-minute one"
    assert two.prompt_tokens > one_prompt


async def test_the_lookback_ends_20_blocks_before_a_breakpoint(
    provider: AnthropicProvider, fake: FakeAnthropic
) -> None:
    base = turns(2)
    await ask(provider, [*base, user("mark", FIVE_MIN)], sys=system(marker=None))
    grown = [*base, user("mark"), *turns(LOOKBACK_BLOCKS // 2 + 1)[1:], user("next", FIVE_MIN)]
    far = await ask(provider, grown, sys=system(marker=None))
    assert far.cache_read_input_tokens == 0, "the earlier entry is more than 20 blocks back"
    near = await ask(provider, [*base, user("mark"), {"role": "assistant", "content": "a"},
                                user("next", FIVE_MIN)], sys=system(marker=None))  # fmt: skip
    assert near.cache_read_input_tokens > 0


async def test_below_the_minimum_nothing_is_cached(
    provider: AnthropicProvider, fake: FakeAnthropic
) -> None:
    short = system(text="Short instructions.")
    for _ in range(2):
        usage = await ask(provider, [user("hi", FIVE_MIN)], sys=short)
        assert usage.cache_creation_input_tokens == usage.cache_read_input_tokens == 0
    body = reported(fake)
    assert body["cache_read_input_tokens"] == body["cache_creation_input_tokens"] == 0
    assert len(fake.cache) == 0


async def test_markers_are_not_part_of_the_key_but_the_model_is(
    provider: AnthropicProvider, fake: FakeAnthropic
) -> None:
    await ask(provider, [user("a", FIVE_MIN)], sys=system(marker=FIVE_MIN))
    moved = await ask(provider, [user("a", FIVE_MIN)], sys=system(marker=None))
    assert moved.cache_read_input_tokens > 0, "same bytes, marker elsewhere: still a hit"
    other = AnthropicProvider(api_key=KEY, base_url=fake.base_url, model="claude-sonnet-5")
    try:
        usage = await ask(other, [user("a", FIVE_MIN)])
    finally:
        await other.aclose()
    assert usage.cache_read_input_tokens == 0, "caches are per model"


async def test_entries_live_for_their_ttl_and_a_read_refreshes_them(
    provider: AnthropicProvider, fake: FakeAnthropic, clock: Clock
) -> None:
    five = system(marker=FIVE_MIN)
    await ask(provider, [user("a")], sys=five)
    clock.now += 299
    assert (await ask(provider, [user("a")], sys=five)).cache_read_input_tokens > 0
    clock.now += 299  # 598 s after the write, 299 s after the read that refreshed it
    assert (await ask(provider, [user("a")], sys=five)).cache_read_input_tokens > 0
    clock.now += 301
    expired = await ask(provider, [user("a")], sys=five)
    assert expired.cache_read_input_tokens == 0 and expired.cache_creation_input_tokens > 0
    hour = system(marker=ONE_HOUR, text=LONG + " (hourly)")
    await ask(provider, [user("a")], sys=hour)
    clock.now += 3_000  # a long gap between runs: only the 1-hour entry survives
    assert (await ask(provider, [user("a")], sys=hour)).cache_read_input_tokens > 0
    clock.now += 3_601
    assert (await ask(provider, [user("a")], sys=hour)).cache_read_input_tokens == 0


async def test_more_than_four_breakpoints_is_the_apis_400(
    provider: AnthropicProvider, fake: FakeAnthropic
) -> None:
    messages = [
        user("one", FIVE_MIN),
        {"role": "assistant", "content": "ok"},
        user("two", FIVE_MIN),
        {"role": "assistant", "content": "ok"},
        user("three", FIVE_MIN),
    ]
    sys = [*system(marker=ONE_HOUR), *system(marker=ONE_HOUR, text="more")]
    with pytest.raises(LlmPermanentError) as err:
        await ask(provider, messages, sys=sys)
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in str(err.value)
    assert err.value.status == 400
    assert len(fake.cache) == 0, "a refused request caches nothing"


async def test_a_one_hour_breakpoint_after_a_five_minute_one_is_refused(
    provider: AnthropicProvider,
) -> None:
    with pytest.raises(LlmPermanentError, match="ttl='1h' cannot come after"):
        await ask(provider, [user("late", ONE_HOUR)], sys=system(marker=FIVE_MIN))


async def test_without_breakpoints_the_usage_has_no_cache_fields(
    provider: AnthropicProvider, fake: FakeAnthropic
) -> None:
    await ask(provider, [{"role": "user", "content": "hi"}], sys="plain")
    # Sonnet 5.5 thinks: how much of the output was thinking comes too.
    assert set(reported(fake)) == {"input_tokens", "output_tokens", "output_tokens_details"}
