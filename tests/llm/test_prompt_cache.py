"""The request laid out for the prompt cache (fleet_agent/llm/prompt_cache.py) and the
history that moves in blocks (fleet_agent/llm/history.py): pure, no I/O."""

from __future__ import annotations

import copy
import inspect
import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleet_agent.llm.history import BLOCKS_PER_BUDGET, block_starts, history_messages
from fleet_agent.llm.prompt import context_message, estimate_tokens, system_prompt
from fleet_agent.llm.prompt_cache import MAX_BREAKPOINTS, breakpoints, cached_request
from fleet_agent.llm.tools import FLEET_TOOLS, LOCAL_TOOLS, tool_schemas
from fleet_agent.models import AgentConfig
from testkit.fakes import validate_messages_request
from tests.helpers.loop import Entry

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TOOLS = tool_schemas(LOCAL_TOOLS | FLEET_TOOLS)


def entry(run: int, chars: int = 600) -> Entry:
    return Entry(run, T0 + timedelta(minutes=5 * run), "ok", f"Message {run}", "x" * chars)


def context(run: int) -> dict[str, Any]:
    text = context_message(
        run=run,
        session=1,
        now=T0 + timedelta(minutes=5 * run),
        trigger_block="Trigger: heartbeat (nothing else happened).",
        fleet_text="No instances.",
        config=AgentConfig(),
        wakes=[],
        next_heartbeat_at=None,
    )
    return {"role": "user", "content": text}


def round_two(run: int) -> list[dict[str, Any]]:
    """This run's messages in its second round: context, a tool call, its result."""
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_fleet_status", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no instances"}
    return [
        context(run),
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, use]},
        {"role": "user", "content": [result]},
    ]


def body(request: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-5-5",
        "max_tokens": 100,
        "system": request.system,
        "tools": request.tools,
        "messages": request.messages,
    }


def test_breakpoints_after_system_summary_history_and_on_the_last_message() -> None:
    history = history_messages([entry(1), entry(2)], 24_000).messages
    current = round_two(3)
    request = cached_request(
        system=system_prompt("a"),
        tools=TOOLS,
        history=history,
        current=current,
        summary="Earlier: the operator asked for 400 proofs/h.",
    )
    marks = breakpoints(request)
    last = len(request.messages) - 1
    assert marks == [
        ("system", 0, -1),  # A: tools + instructions
        ("system", 1, -1),  # B: the session summary
        ("messages", len(history) - 1, 0),  # C: the last history message
        ("messages", last, 0),  # D: the last message of the request (the round's results)
    ]
    assert len(marks) <= MAX_BREAKPOINTS
    ttls = [request.system[0], request.system[1], request.messages[3]["content"][0]]
    assert [b["cache_control"] for b in ttls] == [{"type": "ephemeral", "ttl": "1h"}] * 3
    assert request.messages[last]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert validate_messages_request(body(request)) is None, "the fake API accepts it"


def test_without_summary_or_history_only_the_system_and_the_last_message_are_marked() -> None:
    request = cached_request(system="s", tools=TOOLS, history=[], current=[context(1)])
    assert breakpoints(request) == [("system", 0, -1), ("messages", 0, 0)]
    assert validate_messages_request(body(request)) is None


def test_the_inputs_are_not_modified() -> None:
    history = history_messages([entry(1)], 24_000).messages
    current = round_two(2)
    before = copy.deepcopy((history, current))
    cached_request(system="s", tools=TOOLS, history=history, current=current)
    assert (history, current) == before


def test_nothing_time_varying_in_the_system_prompt() -> None:
    changed = AgentConfig(max_instances=7, heartbeat_seconds=600, min_release_age_minutes=90)
    assert list(inspect.signature(system_prompt).parameters) == ["agent_id"], "no config, no clock"
    fixed = system_prompt("a")
    for figure in ("300s", "20 instances", "$20", "45", "2026", "## Limits"):
        assert (figure in fixed) == (figure == "## Limits"), figure
    text = context(1)["content"]
    assert "## Limits" in text and "at most 20 instances" in text and "heartbeat every 300s" in text
    other = context_message(
        run=1,
        session=1,
        now=T0,
        trigger_block="t",
        fleet_text="f",
        config=changed,
        wakes=[],
        next_heartbeat_at=None,
    )
    assert "at most 7 instances" in other and "minimum release age 90 min" in other


def _prefix(request: Any, history_len: int) -> str:
    """The bytes the cache keys on up to the end of the history, markers removed."""

    def bare(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: bare(v) for k, v in x.items() if k != "cache_control"}
        if isinstance(x, list):
            return [bare(v) for v in x]
        return x

    messages = bare(request.messages[:history_len])
    for m in messages:  # a marked text block and its text are the same prompt
        content = m["content"]
        if isinstance(content, list) and len(content) == 1 and content[0]["type"] == "text":
            m["content"] = content[0]["text"]
    return json.dumps([bare(request.tools), bare(request.system), messages])


@pytest.mark.parametrize("budget", [4_000, 24_000])
def test_the_prefix_is_byte_identical_from_run_to_run_until_a_block_boundary(budget: int) -> None:
    rng = random.Random(7)
    entries: list[Entry] = []
    previous: tuple[str, int] | None = None
    moves = 0
    for run in range(1, 301):
        trimmed = history_messages(entries, budget)
        assert trimmed.tokens <= budget, "the budget holds"
        request = cached_request(
            system=system_prompt("a"),
            tools=TOOLS,
            history=trimmed.messages,
            current=[context(run)],
        )
        prefix = _prefix(request, len(trimmed.messages))
        if previous is not None:
            old_prefix, old_start = previous
            if trimmed.start == old_start:
                # Only appended to: the previous prefix is this one's beginning.
                assert prefix.startswith(old_prefix.removesuffix("]]")), f"run {run}"
            else:
                moves += 1
                costs = [
                    estimate_tokens(m["content"]) + estimate_tokens(n["content"])
                    for m, n in zip(
                        history_messages(entries, 10**9).messages[::2],
                        history_messages(entries, 10**9).messages[1::2],
                        strict=True,
                    )
                ]
                assert trimmed.start in block_starts(costs, budget), f"run {run}: a block start"
        previous = (prefix, trimmed.start)
        if rng.random() < 0.25:  # a quarter of the runs stay in the prompt
            entries.append(entry(run, rng.randrange(200, 2_000)))
    total = sum(estimate_tokens(m["content"]) for m in history_messages(entries, 10**9).messages)
    # The start moved about once per block of new history, never per run.
    assert 1 <= moves <= total // (budget // BLOCKS_PER_BUDGET) + 1
    assert moves < len(entries) / 3


def test_a_run_left_out_of_the_prompt_changes_nothing_before_the_run() -> None:
    entries = [entry(i) for i in range(1, 6)]
    one = cached_request(
        system="s",
        tools=TOOLS,
        history=history_messages(entries, 24_000).messages,
        current=[context(6)],
    )
    two = cached_request(
        system="s",
        tools=TOOLS,
        history=history_messages(entries, 24_000).messages,
        current=[context(7)],
    )
    assert one.messages[:-1] == two.messages[:-1] and one.system == two.system
