"""True token counts: the real anthropic client's count_tokens against the fake
Messages API, cached by content hash, the estimate calibrated from the counts,
the fallback when counting fails; and the whole request fitted to its budget."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.prompt_cache import CachedRequest, cached_request
from fleet_agent.llm.request_fit import RequestTooLarge, cut_context, fit_request
from fleet_agent.llm.token_count import COUNT_FROM_SHARE, RequestTokens
from fleet_agent.llm.transcript import (
    CONTEXT_SEQ,
    FOLD_HEADING,
    StoredReply,
    StoredToolResults,
    api_messages,
    assistant_seq,
    dumps,
    tool_results_seq,
)
from fleet_agent.models import RequestLayout, ToolResult
from testkit.fakes.anthropic_cache import prompt_tokens
from testkit.fakes.anthropic_server import ErrorReply, FakeAnthropic

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


def run_rows(rounds: int, result_chars: int) -> list[tuple[int, str]]:
    """A run's stored rows: its context, then rounds of a thinking reply with
    one tool call and its result."""
    rows = [(CONTEXT_SEQ, "[run #9] context")]
    for r in range(1, rounds + 1):
        reply = StoredReply(
            content=[
                {"type": "thinking", "thinking": "", "signature": f"sig-{r}"},
                {"type": "tool_use", "id": f"t{r}", "name": "get_fleet_status", "input": {}},
            ],
            stop_reason="tool_use",
        )
        results = StoredToolResults(
            results=[
                ToolResult(
                    tool_use_id=f"t{r}",
                    name="get_fleet_status",
                    content=f"fleet of round {r}\n" + "row " * (result_chars // 4),
                )
            ]
        )
        rows += [(assistant_seq(r), dumps(reply)), (tool_results_seq(r), dumps(results))]
    return rows


def builder(
    rows: list[tuple[int, str]], history: list[dict[str, Any]]
) -> Callable[[RequestLayout], CachedRequest]:
    """The request of the round after `rows` under a layout, as call_llm builds it."""

    def build(layout: RequestLayout) -> CachedRequest:
        current = api_messages(rows, fold_upto=layout.folded_upto)
        return cached_request(
            system="sys",
            tools=[],
            history=history[layout.history_dropped :],
            current=cut_context(current, layout.context_keep),
        )

    return build


def plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` without cache markers, a one-text-block content as its text."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
            if len(content) == 1 and content[0]["type"] == "text":
                content = content[0]["text"]
        out.append({**m, "content": content})
    return out


def turns(request: CachedRequest) -> list[dict[str, Any]]:
    return [m for m in request.messages if m["role"] == "assistant"]


async def test_a_run_within_its_share_keeps_its_turns_and_its_layout() -> None:
    rows = run_rows(3, 400)
    fitted = await fit_request(
        builder(rows, []),
        previous=RequestLayout(),
        rounds=3,
        history_len=0,
        run_share=24_000,
        window=200_000,
        tokens=RequestTokens(None),
    )
    assert fitted.layout == RequestLayout()
    assert [b["signature"] for m in turns(fitted.request) for b in m["content"][:1]] == [
        "sig-1",
        "sig-2",
        "sig-3",
    ]


async def test_a_run_over_its_share_is_folded_whole_and_the_next_round_keeps_the_fold() -> None:
    """Condensing one old tool result would change what a later thinking block
    was given: the run is folded whole, the newest results kept in full."""
    history = [user("[run #8] earlier"), {"role": "assistant", "content": "done"}]
    rows = run_rows(4, 8_000)
    tokens = RequestTokens(None)
    fitted = await fit_request(
        builder(rows, history),
        previous=RequestLayout(),
        rounds=4,
        history_len=2,
        run_share=3_000,
        window=200_000,
        tokens=tokens,
    )
    assert fitted.layout == RequestLayout(folded_upto=4)
    assert len(turns(fitted.request)) == 1, "the history's answer; no turn of the run is left"
    digest = fitted.request.messages[-1]["content"][1]["text"]
    assert digest.startswith(FOLD_HEADING)
    assert "- round 1: get_fleet_status({}) → fleet of round 1" in digest
    assert "row " * 100 in digest.split("- round 4")[1], "the newest results stay whole"
    assert fitted.request.messages[:1] == history[:1]
    # The next round starts from that layout and adds its own turn at the end.
    rows += run_rows(5, 400)[-2:]
    again = await fit_request(
        builder(rows, history),
        previous=fitted.layout,
        rounds=5,
        history_len=2,
        run_share=30_000,
        window=200_000,
        tokens=tokens,
    )
    assert again.layout == fitted.layout
    before, after = plain(fitted.request.messages), plain(again.request.messages)
    assert after[: len(before)] == before, "what the round's thinking was given is unchanged"
    assert [m["content"][0]["signature"] for m in turns(again.request)[1:]] == ["sig-5"]


async def test_a_request_never_goes_over_the_window() -> None:
    history = [
        m
        for n in range(10)
        for m in (user(f"run {n} " * 400), {"role": "assistant", "content": "ok"})
    ]
    rows = run_rows(2, 8_000)
    tokens = RequestTokens(None)
    fitted = await fit_request(
        builder(rows, history),
        previous=RequestLayout(),
        rounds=2,
        history_len=len(history),
        run_share=100_000,
        window=3_000,
        tokens=tokens,
    )
    assert fitted.tokens <= 3_000
    assert fitted.layout.folded_upto == 2 and fitted.layout.history_dropped > 0
    with pytest.raises(RequestTooLarge):
        await fit_request(
            builder(rows, history),
            previous=RequestLayout(),
            rounds=2,
            history_len=len(history),
            run_share=100_000,
            window=100,
            tokens=tokens,
        )


async def test_a_flood_of_long_messages_in_the_context_is_cut_in_the_middle() -> None:
    context = "[run #9] head\n" + "".join(f"msg-{i:04d} " + "y" * 2_000 + "\n" for i in range(300))
    fitted = await fit_request(
        builder([(CONTEXT_SEQ, context)], []),
        previous=RequestLayout(),
        rounds=0,
        history_len=0,
        run_share=1_000_000,
        window=20_000,
        tokens=RequestTokens(None),
    )
    assert fitted.tokens <= 20_000 and fitted.layout.context_keep < 1
    text = fitted.request.messages[0]["content"][0]["text"]
    assert text.startswith("[run #9] head") and "msg-0299 " + "y" * 100 in text
    assert "cut here" in text
