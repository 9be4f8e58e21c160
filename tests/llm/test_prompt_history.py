"""Earlier runs as prompt history (`fleet_agent.llm.history`) and the token
estimate that budgets it. Pure: no server."""

from __future__ import annotations

from typing import Any

import pytest

from fleet_agent.llm.history import block_starts, history_messages
from fleet_agent.llm.prompt import estimate_tokens
from testkit.fakes import validate_messages_request
from tests.helpers.loop import Entry, at


def entry(run: int, final: str = "", *, status: str = "ok", digest: str = "") -> Entry:
    return Entry(
        run=run,
        started_at=at(run * 60),
        status=status,
        trigger_block=f"TRIGGER-{run}",
        final_text=final or f"FINAL-{run}",
        actions_digest=digest,
    )


@pytest.mark.parametrize(
    ("text", "tokens"), [("", 0), ("a", 1), ("abcdefg", 2), ("x" * 3500, 1000), ("é" * 8, 3)]
)
def test_estimate_tokens(text: str, tokens: int) -> None:
    assert estimate_tokens(text) == tokens


def _roles(messages: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in messages]


def test_history_alternates_user_and_assistant_oldest_first() -> None:
    trimmed = history_messages([entry(1), entry(2), entry(3)], 10_000)
    assert _roles(trimmed.messages) == ["user", "assistant"] * 3
    assert [m["content"].split("\n")[-1] for m in trimmed.messages] == [
        "TRIGGER-1",
        "FINAL-1",
        "TRIGGER-2",
        "FINAL-2",
        "TRIGGER-3",
        "FINAL-3",
    ]
    assert trimmed.messages[0]["content"].startswith("[run #1 · 2026-03-01 12:01:00Z]")
    assert (trimmed.included, trimmed.dropped) == (3, 0)
    assert trimmed.tokens == sum(estimate_tokens(m["content"]) for m in trimmed.messages)
    # The messages are a valid start of a Messages API conversation.
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [*trimmed.messages, {"role": "user", "content": "now"}],
    }
    assert validate_messages_request(body) is None


def test_empty_history() -> None:
    trimmed = history_messages([], 1_000)
    assert (trimmed.messages, trimmed.included, trimmed.dropped, trimmed.tokens) == ([], 0, 0, 0)


@pytest.mark.parametrize("budget", [1_000, 1_500, 2_500, 5_000])
def test_budget_drops_the_oldest_runs_first(budget: int) -> None:
    entries = [entry(i, f"FINAL-{i} " + "x" * 1_400) for i in range(1, 21)]  # ≈ 420 tokens each
    trimmed = history_messages(entries, budget)
    assert trimmed.tokens <= budget
    assert trimmed.included + trimmed.dropped == 20
    assert 1 <= trimmed.included < 20
    kept = [int(m["content"].split()[0].removeprefix("FINAL-")) for m in trimmed.messages[1::2]]
    assert kept == list(range(21 - trimmed.included, 21)), "a contiguous run of the newest"
    # The window starts at a block (fleet_agent/llm/history.py), and the block
    # before it would have broken the budget; so at most about a block (a
    # quarter of the budget) plus one run is left unused.
    costs = [estimate_tokens(m["content"]) for m in history_messages(entries, 10**9).messages]
    per_run = [a + b for a, b in zip(costs[::2], costs[1::2], strict=True)]
    starts = block_starts(per_run, budget)
    # (or, when the newest block alone is over budget, inside that block)
    assert trimmed.start in starts or trimmed.start > max(starts)
    earlier = [s for s in starts if s < trimmed.start]
    if earlier:
        assert sum(per_run[max(earlier) :]) > budget
    assert trimmed.tokens > budget - budget // 4 - max(per_run)


def test_a_single_oversize_entry_is_cut_in_the_middle_not_dropped() -> None:
    final = "HEAD " + "y" * 100_000 + " TAIL"
    trimmed = history_messages([entry(1), entry(2, final)], 1_000)
    assert (trimmed.included, trimmed.dropped) == (1, 1)
    assert trimmed.tokens <= 1_000
    answer = trimmed.messages[1]["content"]
    assert answer.startswith("HEAD ") and answer.endswith(" TAIL")
    assert "cut to fit the history budget" in answer
    assert trimmed.messages[0]["content"].endswith("TRIGGER-2"), "short user part kept whole"


def test_an_oversize_older_entry_is_dropped_whole() -> None:
    trimmed = history_messages([entry(1, "z" * 100_000), entry(2)], 1_000)
    assert (trimmed.included, trimmed.dropped) == (1, 1)
    assert "cut to fit" not in str(trimmed.messages)
    assert trimmed.messages[1]["content"] == "FINAL-2"


def test_failed_and_empty_runs_are_rendered_and_actions_digested() -> None:
    trimmed = history_messages(
        [
            entry(1, status="failed", digest="- create_instance: rented 42"),
            Entry(2, at(120), "ok", "TRIGGER-2", "   "),
        ],
        10_000,
    )
    failed, empty = trimmed.messages[1]["content"], trimmed.messages[3]["content"]
    assert failed == (
        "(this run failed before it could answer)\n\nActions taken:\n- create_instance: rented 42"
    )
    assert "FINAL-1" not in failed
    assert empty == "(no final message)"
