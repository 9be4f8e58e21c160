"""True token counts: the real anthropic client's count_tokens against the fake
Messages API, cached by content hash, the estimate calibrated from the counts,
the fallback when counting fails; and the whole request fitted to its budget."""

from __future__ import annotations

from typing import Any

import pytest

from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.prompt_cache import cached_request
from fleet_agent.request_fit import RequestTooLarge, condense_tool_results, fit_request
from fleet_agent.token_count import COUNT_FROM_SHARE, RequestTokens
from tests.fakes.anthropic_cache import prompt_tokens
from tests.fakes.anthropic_server import ErrorReply, FakeAnthropic

SYSTEM = [{"type": "text", "text": "You manage a fleet."}]
TOOLS: list[dict[str, Any]] = []


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def test_count_tokens_counts_caches_by_content_and_calibrates(
    fake_llm: FakeAnthropic,
) -> None:
    async with AnthropicProvider() as provider:
        tokens = RequestTokens(provider)
        messages = [user("How is the fleet? " * 200)]
        first = await tokens.count(SYSTEM, TOOLS, messages)
        again = await tokens.count(SYSTEM, TOOLS, messages)
    assert first.counted and again == first
    assert len(fake_llm.count_tokens_requests) == 1  # the second came from the cache
    body = {"model": provider.model, "system": SYSTEM, "messages": messages, "max_tokens": 1}
    assert first.tokens == prompt_tokens(body)
    # The fake counts JSON / 4, the estimate JSON / 3.5: the ratio moves toward 0.875.
    assert 0.85 < tokens.ratio < 1.0
    assert tokens.estimate(SYSTEM, TOOLS, messages) < RequestTokens(None).estimate(
        SYSTEM, TOOLS, messages
    )


@pytest.mark.parametrize("status", [500, 429, 404])
async def test_when_counting_fails_the_estimate_is_used(
    fake_llm: FakeAnthropic, status: int
) -> None:
    fake_llm.count_tokens_error = ErrorReply(status)
    async with AnthropicProvider() as provider:
        tokens = RequestTokens(provider)
        messages = [user("Any machine to release? " * 50)]
        count = await tokens.count(SYSTEM, TOOLS, messages)
    assert not count.counted
    assert count.tokens == RequestTokens(None).estimate(SYSTEM, TOOLS, messages)
    assert tokens.failed == 1 and tokens.ratio == 1.0


async def test_when_the_api_is_unreachable_the_estimate_is_used(fake_llm: FakeAnthropic) -> None:
    fake_llm.stop()
    async with AnthropicProvider() as provider:
        count = await RequestTokens(provider).count(SYSTEM, TOOLS, [user("hello")])
    assert not count.counted and count.tokens > 0


async def test_a_request_far_below_the_window_is_not_counted(fake_llm: FakeAnthropic) -> None:
    """A count is an HTTP round trip before the model's call: made only when
    the calibrated estimate passes half the window (COUNT_FROM_SHARE)."""
    messages = [user("How is the fleet? " * 200)]
    async with AnthropicProvider() as provider:
        tokens = RequestTokens(provider)
        estimate = tokens.estimate(SYSTEM, TOOLS, messages)
        far = await tokens.measure(SYSTEM, TOOLS, messages, window=2 * estimate)
        assert not far.counted and far.tokens == estimate
        assert fake_llm.count_tokens_requests == []
        near = await tokens.measure(SYSTEM, TOOLS, messages, window=2 * estimate - 1)
    assert near.counted and len(fake_llm.count_tokens_requests) == 1
    body = {"model": provider.model, "system": SYSTEM, "messages": messages, "max_tokens": 1}
    assert near.tokens == prompt_tokens(body)
    assert COUNT_FROM_SHARE == 0.5


def run_messages(rounds: int, result_chars: int) -> list[dict[str, Any]]:
    messages = [user("[run #9] context")]
    for r in range(rounds):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": f"t{r}", "name": "get_fleet_status", "input": {}}
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"t{r}",
                        "content": f"fleet of round {r}\n" + "row " * (result_chars // 4),
                    }
                ],
            }
        )
    return messages


def test_condensing_keeps_a_line_per_tool_result_and_the_newest_whole() -> None:
    messages = run_messages(3, 4_000)
    condensed, cut = condense_tool_results(messages, keep_last=True)
    assert cut == 2
    assert condensed[2]["content"][0]["content"].startswith("fleet of round 0 [condensed: ")
    assert condensed[-1] == messages[-1]
    assert messages[2]["content"][0]["content"].startswith("fleet of round 0\nrow")  # untouched


async def test_a_run_over_its_share_condenses_its_older_tool_results() -> None:
    history = [user("[run #8] earlier"), {"role": "assistant", "content": "done"}]
    request = cached_request(
        system="sys", tools=[], history=history, current=run_messages(4, 8_000)
    )
    fitted = await fit_request(
        request, len(history), run_share=3_000, window=200_000, tokens=RequestTokens(None)
    )
    assert fitted.condensed == 3 and fitted.history_dropped == 0
    assert fitted.tokens < 4_000 and not fitted.counted
    assert fitted.request.messages[:2] == request.messages[:2]


async def test_a_request_never_goes_over_the_window() -> None:
    history = [
        m
        for n in range(10)
        for m in (user(f"run {n} " * 400), {"role": "assistant", "content": "ok"})
    ]
    request = cached_request(
        system="sys", tools=[], history=history, current=run_messages(2, 8_000)
    )
    tokens = RequestTokens(None)
    fitted = await fit_request(
        request, len(history), run_share=100_000, window=3_000, tokens=tokens
    )
    assert fitted.tokens <= 3_000
    assert fitted.history_dropped > 0 and fitted.condensed == 2
    with pytest.raises(RequestTooLarge):
        await fit_request(request, len(history), run_share=100_000, window=100, tokens=tokens)


async def test_a_flood_of_long_messages_in_the_context_is_cut_in_the_middle() -> None:
    context = "[run #9] head\n" + "".join(f"msg-{i:04d} " + "y" * 2_000 + "\n" for i in range(300))
    request = cached_request(system="sys", tools=[], history=[], current=[user(context)])
    fitted = await fit_request(
        request, 0, run_share=1_000_000, window=20_000, tokens=RequestTokens(None)
    )
    assert fitted.tokens <= 20_000
    text = fitted.request.messages[0]["content"][0]["text"]
    assert text.startswith("[run #9] head") and "msg-0299 " + "y" * 100 in text
    assert "cut here" in text
