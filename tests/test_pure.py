"""Unit tests of the Temporal-free modules: schedule, wakes, verdict, prompt,
transcript and the config patch. No server, no I/O: the whole file runs in
well under a second."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from fleet_agent.llm.history import block_starts, history_messages
from fleet_agent.llm.prompt import estimate_tokens, render_trigger_block
from fleet_agent.llm.tools import CancelWakeInput, ScheduleNextCheckInput, parse_tool_input
from fleet_agent.llm.transcript import (
    FOLD_HEADING,
    PAUSED_TEXT,
    SETTLED_THINKING_CHARS,
    StoredReply,
    StoredToolResults,
    api_messages,
    assistant_seq,
    dumps,
    reply_text,
    settled,
    tool_calls_of,
    tool_results_seq,
)
from fleet_agent.llm.verdict import parse_verdict, strip_verdict
from fleet_agent.loop.schedule import next_due
from fleet_agent.loop.triggers import TriggerBuffer
from fleet_agent.loop.wakes import (
    MAX_PENDING_WAKES,
    add_wake,
    cancel_wake,
    decide_wake,
    due_wakes,
)
from fleet_agent.models import (
    AgentConfig,
    ConfigPatch,
    Priority,
    TokenUsage,
    ToolCall,
    ToolResult,
    Trigger,
    TriggerKind,
    Verdict,
    Wake,
)
from testkit.fakes import validate_messages_request

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


_seq = iter(range(1, 1_000_000))


def trig(kind: TriggerKind, after: float = 0.0, **fields: Any) -> Trigger:
    return Trigger(seq=next(_seq), kind=kind, received_at=at(after), **fields)


def firsts_of(pending: list[Trigger]) -> dict[Priority, datetime]:
    """When each priority's oldest trigger arrived, as the agent's buffer keeps it."""
    return TriggerBuffer([t.model_copy() for t in pending], []).firsts


def wake(wake_id: str, after: float, reason: str = "check") -> Wake:
    return Wake(id=wake_id, due_at=at(after), reason=reason, requested_by_run=1)


# ====================================================================== schedule


def due_offset(pending: list[Trigger], wakes: list[Wake] | None = None, **config: Any) -> float:
    due = next_due(
        firsts=firsts_of(pending),
        wakes=wakes or [],
        config=AgentConfig(**config),
        heartbeat_from=T0,
    )
    assert due is not None
    return (due.at - T0).total_seconds()


def test_nothing_pending_runs_at_the_heartbeat() -> None:
    due = next_due(firsts=firsts_of([]), wakes=[], config=AgentConfig(), heartbeat_from=T0)
    assert due is not None
    assert (due.at, due.cause, due.label) == (at(300), "heartbeat", "heartbeat")


def test_heartbeat_counts_from_the_last_run_end() -> None:
    ended = at(1234.5)
    due = next_due(
        firsts=firsts_of([]),
        wakes=[],
        config=AgentConfig(heartbeat_seconds=600),
        heartbeat_from=ended,
    )
    assert due is not None and due.at == ended + timedelta(seconds=600)


@pytest.mark.parametrize(
    ("kind", "offsets", "window"),
    [
        (TriggerKind.STATE_CHANGED, [0, 3, 6, 9.9], 10),
        (TriggerKind.STATE_CHANGED, [2, 0, 5], 10),  # order of arrival in the list is irrelevant
        (TriggerKind.HUMAN_MESSAGE, [0, 0.5, 1.9], 2),
        (TriggerKind.TRIGGER_NOW, [0, 1], 2),
    ],
)
def test_debounce_window_is_fixed_from_the_first_trigger_of_the_batch(
    kind: TriggerKind, offsets: list[float], window: float
) -> None:
    pending = [trig(kind, o) for o in offsets]
    assert due_offset(pending) == min(offsets) + window
    due = next_due(firsts=firsts_of(pending), wakes=[], config=AgentConfig(), heartbeat_from=T0)
    assert due is not None and due.cause == "debounce"


def test_a_steady_stream_never_postpones_the_run() -> None:
    pending = [trig(TriggerKind.STATE_CHANGED, i * 0.5) for i in range(100)]  # 50 s of changes
    assert due_offset(pending) == 10


def test_p0_shortens_a_p1_window() -> None:
    pending = [trig(TriggerKind.STATE_CHANGED, 0), trig(TriggerKind.HUMAN_MESSAGE, 5)]
    assert due_offset(pending) == 7


def test_p1_never_lengthens_a_p0_window() -> None:
    pending = [trig(TriggerKind.HUMAN_MESSAGE, 0), trig(TriggerKind.STATE_CHANGED, 1)]
    assert due_offset(pending) == 2


def test_late_p0_does_not_postpone_an_open_p1_window() -> None:
    pending = [trig(TriggerKind.STATE_CHANGED, 0), trig(TriggerKind.TRIGGER_NOW, 9)]
    assert due_offset(pending) == 10


def test_windows_come_from_the_config() -> None:
    pending = [trig(TriggerKind.STATE_CHANGED, 0)]
    assert due_offset(pending, p1_debounce_seconds=42) == 42
    due = next_due(
        firsts=firsts_of(pending),
        wakes=[],
        config=AgentConfig(p1_debounce_seconds=42),
        heartbeat_from=T0,
    )
    assert due is not None and due.label == "debounce P1 42s"


def test_a_pending_heartbeat_trigger_opens_no_window() -> None:
    assert due_offset([trig(TriggerKind.HEARTBEAT, 0)]) == 300


def test_earliest_wake_wins_over_the_heartbeat() -> None:
    wakes = [wake("w2", 200, "second"), wake("w1", 100, "first"), wake("w3", 250)]
    due = next_due(firsts=firsts_of([]), wakes=wakes, config=AgentConfig(), heartbeat_from=T0)
    assert due is not None
    assert (due.at, due.cause, due.label) == (at(100), "wake", "wake: first")


def test_debounce_before_a_later_wake_and_wake_before_a_later_window() -> None:
    assert due_offset([trig(TriggerKind.STATE_CHANGED, 0)], [wake("w", 60)]) == 10
    assert due_offset([trig(TriggerKind.STATE_CHANGED, 0)], [wake("w", 4)]) == 4


def test_heartbeat_before_an_open_window_wins() -> None:
    # The last run ended 295 s ago: the heartbeat is due before the P1 window.
    due = next_due(
        firsts=firsts_of([trig(TriggerKind.STATE_CHANGED, 0)]),
        wakes=[],
        config=AgentConfig(),
        heartbeat_from=at(-295),
    )
    assert due is not None and (due.at, due.cause) == (at(5), "heartbeat")


def test_nothing_is_due_while_paused() -> None:
    assert (
        next_due(
            firsts=firsts_of([trig(TriggerKind.HUMAN_MESSAGE, 0)]),
            wakes=[wake("w", 1)],
            config=AgentConfig(paused=True),
            heartbeat_from=T0,
        )
        is None
    )


# ====================================================================== wakes


def decide(
    delay: float, wakes: list[Wake] | None = None, *, heartbeat: int = 3600, reason: str = "why"
) -> Any:
    return decide_wake(
        wakes or [],
        now=T0,
        delay_seconds=delay,
        reason=reason,
        run=7,
        wake_id="w7-1",
        heartbeat_seconds=heartbeat,
    )


@pytest.mark.parametrize(
    ("asked", "effective", "clamped"),
    [
        (90, 90, False),
        (30, 30, False),
        (86_400, 86_400, False),
        (5, 30, True),
        (0, 30, True),
        (-100, 30, True),
        (10**7, 86_400, True),
        (float("inf"), 86_400, True),
    ],
)
def test_delay_is_clamped_to_30s_24h(asked: float, effective: float, clamped: bool) -> None:
    decision = decide(asked, heartbeat=1800)
    assert decision.outcome == "scheduled"
    assert decision.wake == Wake(id="w7-1", due_at=at(effective), reason="why", requested_by_run=7)
    assert ("clamped" in decision.message) is clamped


@pytest.mark.parametrize(
    ("delay", "outcome"),
    [
        (239, "scheduled"),
        (240, "heartbeat_covers"),
        (300, "heartbeat_covers"),
        (360, "heartbeat_covers"),
        (361, "scheduled"),
    ],
)
def test_requests_near_the_heartbeat_are_covered(delay: float, outcome: str) -> None:
    decision = decide(delay, heartbeat=300)
    assert decision.outcome == outcome
    assert (decision.wake is None) is (outcome == "heartbeat_covers")


def test_heartbeat_check_uses_the_clamped_delay() -> None:
    # 1 s is clamped to 30 s, which is within 60 s of a 60 s heartbeat.
    assert decide(1, heartbeat=60).outcome == "heartbeat_covers"


@pytest.mark.parametrize(
    ("delay", "outcome"),
    [(970, "merged"), (1030, "merged"), (1031, "scheduled"), (969, "scheduled")],
)
def test_requests_within_30s_of_a_wake_are_merged(delay: float, outcome: str) -> None:
    existing = wake("w1-1", 1000)
    decision = decide(delay, [existing])
    assert decision.outcome == outcome
    if outcome == "merged":
        assert decision.wake == existing
        assert "w1-1" in decision.message


def test_the_51st_wake_is_refused_but_merging_still_works() -> None:
    wakes = [wake(f"w{i}", 1000 + 100 * i) for i in range(MAX_PENDING_WAKES)]
    assert decide(50_000, wakes).outcome == "refused"
    assert decide(50_000, wakes[:-1]).outcome == "scheduled"
    assert decide(1010, wakes).outcome == "merged"


def test_reason_is_trimmed_and_defaulted() -> None:
    assert decide(900, reason="  recheck  ").wake.reason == "recheck"
    assert decide(900, reason="   ").wake.reason == "check"
    assert len(decide(900, reason="x" * 5000).wake.reason) == 500


def test_decide_wake_leaves_the_list_alone() -> None:
    wakes = [wake("w1", 5000)]
    decide(900, wakes)
    assert wakes == [wake("w1", 5000)]


def test_nan_delay_is_refused() -> None:
    # A NaN used to raise inside the workflow task and hang the run (±inf clamp).
    assert decide(float("nan")).outcome == "refused"


def test_add_wake_is_idempotent_and_sorted() -> None:
    late, early = wake("w1-1", 5000), wake("w2-1", 1000)
    once = add_wake(add_wake([], late), early)
    assert once == [early, late]
    assert add_wake(once, early) == once
    assert add_wake(add_wake(once, late), early) == once


def test_add_wake_rechecks_merge_and_cap() -> None:
    assert add_wake([wake("a", 1000)], wake("b", 1020)) == [wake("a", 1000)]
    full = [wake(f"w{i}", 1000 + 100 * i) for i in range(MAX_PENDING_WAKES)]
    assert add_wake(full, wake("extra", 90_000)) == full


def test_cancel_wake_reports_whether_it_existed_and_is_idempotent() -> None:
    wakes = [wake("a", 100), wake("b", 200)]
    kept, existed = cancel_wake(wakes, "a")
    assert kept == [wake("b", 200)] and existed
    again, existed_again = cancel_wake(kept, "a")
    assert again == kept and not existed_again


def test_due_wakes_splits_at_now_inclusive_and_fires_once() -> None:
    wakes = [wake("a", 100), wake("b", 200), wake("c", 300)]
    due, pending = due_wakes(wakes, at(200))
    assert [w.id for w in due] == ["a", "b"]
    assert [w.id for w in pending] == ["c"]
    assert due_wakes(pending, at(200)) == ([], pending)


# ====================================================================== verdict

TAG = '<verdict>{{"action": {a}, "state_changed": {s}}}</verdict>'


@pytest.mark.parametrize("action", [True, False])
@pytest.mark.parametrize("changed", [True, False])
def test_valid_verdict(action: bool, changed: bool) -> None:
    text = "All good.\n" + TAG.format(a=json.dumps(action), s=json.dumps(changed)) + "\n  \n"
    assert parse_verdict(text) == (Verdict(action=action, state_changed=changed), "")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("No tag at all.", "no <verdict> tag"),
        ("", "no <verdict> tag"),
        ("<verdict>{action: true}</verdict>", "not JSON"),
        ("<verdict></verdict>", "not JSON"),
        ('<verdict>{"action": TRUE, "state_changed": false}</verdict>', "not JSON"),
        ("<verdict>[true, false]</verdict>", "JSON object"),
        ('<verdict>{"action": true}</verdict>', "lacks state_changed"),
        ("<verdict>{}</verdict>", "lacks action, state_changed"),
        ('<verdict>{"action": 1, "state_changed": false}</verdict>', "booleans"),
        ('<verdict>{"action": "true", "state_changed": false}</verdict>', "booleans"),
        ('<verdict>{"action": null, "state_changed": false}</verdict>', "booleans"),
        ('<verdict>{"action": true, "state_changed": false}</verdict> thanks!', "not at the end"),
        ('<verdict>{"action": true, "state_changed": false}</verdict>', None),
    ],
)
def test_bad_verdicts_are_reported(text: str, error: str | None) -> None:
    verdict, message = parse_verdict(text)
    if error is None:
        assert verdict is not None and message == ""
    else:
        assert verdict is None and error in message


def test_the_last_of_several_tags_counts() -> None:
    text = (
        "Earlier I wrote " + TAG.format(a="true", s="true") + " but then:\n"
        "Final.\n" + TAG.format(a="false", s="false")
    )
    assert parse_verdict(text) == (Verdict(action=False, state_changed=False), "")


def test_tag_is_case_insensitive_and_json_may_span_lines() -> None:
    text = 'Done.\n<VERDICT>{\n  "action": true,\n  "state_changed": false\n}</Verdict>'
    assert parse_verdict(text) == (Verdict(action=True, state_changed=False), "")


def test_a_stray_opening_tag_in_prose_does_not_hide_the_verdict() -> None:
    text = "I end with a <verdict> tag as asked.\n" + TAG.format(a="true", s="false")
    assert parse_verdict(text) == (Verdict(action=True, state_changed=False), "")


def test_strip_verdict() -> None:
    assert strip_verdict("Hi.\n" + TAG.format(a="true", s="true") + "\n") == "Hi."


# ====================================================================== prompt


@dataclass(frozen=True)
class Entry:
    run: int
    started_at: datetime
    status: str
    trigger_block: str
    final_text: str
    actions_digest: str = ""


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


def test_empty_trigger_list_is_a_heartbeat() -> None:
    assert render_trigger_block([]) == "Trigger: heartbeat (nothing else happened)."
    assert render_trigger_block([trig(TriggerKind.HEARTBEAT)]) == (
        "Trigger: heartbeat (nothing else happened)."
    )


def test_every_kind_is_rendered() -> None:
    block = render_trigger_block(
        [
            trig(TriggerKind.TRIGGER_NOW, reason="ops asked"),
            trig(TriggerKind.WAKE, wake_id="w3-1", reason="loading check"),
            trig(TriggerKind.STATE_CHANGED, instance_id="9", new_state="loading"),
            trig(
                TriggerKind.STATE_CHANGED,
                instance_id="9",
                old_state="loading",
                new_state="running",
                detail="ready",
            ),
            trig(TriggerKind.AGENT_STARTED, reason="fresh start"),
            trig(TriggerKind.SESSION_RESET, reason="too long"),
            trig(TriggerKind.CONFIG_CHANGED, reason="target_proofs_per_hour: 0 → 5"),
            trig(TriggerKind.HEARTBEAT),
        ]
    )
    assert block.splitlines() == [
        "Run requested at 2026-03-01 12:00:00Z: ops asked",
        "Scheduled wake w3-1 (asked for: loading check)",
        "Instance 9: new → loading",
        "Instance 9: loading → running — ready",
        "The agent started: fresh start.",
        "A new session started (the conversation was reset): too long.",
        "The operator changed the configuration: target_proofs_per_hour: 0 → 5.",
    ]


def test_1000_state_changes_are_summarised_and_human_messages_kept_verbatim() -> None:
    messages = [
        "Why is #12 down?\n  Please check — ünïcödé <b>ok</b>",
        "second question " + "q" * 5_000,
    ]
    triggers = [
        trig(
            TriggerKind.STATE_CHANGED,
            i * 0.01,
            instance_id=str(i % 37),
            old_state="loading",
            new_state="exited" if i == 965 else "running",  # the last change of "3"
            detail=f"detail-{i} " + "d" * 100,
        )
        for i in range(1_000)
    ]
    triggers += [trig(TriggerKind.HUMAN_MESSAGE, 5, text=t, author="ops") for t in messages]
    block = render_trigger_block(triggers)
    for text in messages:
        assert f"Message from ops at 2026-03-01 12:00:05Z:\n{text}" in block
    changes = block.replace(messages[0], "").replace(messages[1], "")
    assert estimate_tokens(changes) < 100, changes
    assert "1000 state changes on 37 instances (1 now exited, 36 now running)" in block
    assert "detail-" not in block


@pytest.mark.parametrize(("count", "lines"), [(40, 40), (41, 1)])
def test_state_changes_are_listed_up_to_40(count: int, lines: int) -> None:
    block = render_trigger_block(
        [trig(TriggerKind.STATE_CHANGED, instance_id=str(i), new_state="up") for i in range(count)]
    )
    assert len(block.splitlines()) == lines


# ====================================================================== transcript


def test_sequence_numbers() -> None:
    assert [(assistant_seq(r), tool_results_seq(r)) for r in (1, 2, 3)] == [(1, 2), (3, 4), (5, 6)]


def test_api_messages_round_trip_through_stored_json() -> None:
    first = StoredReply(
        content=[
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_a", "name": "get_fleet_status", "input": {}},
            {
                "type": "tool_use",
                "id": "toolu_b",
                "name": "schedule_next_check",
                "input": {"delay_seconds": 900, "reason": "loading"},
            },
        ],
        stop_reason="tool_use",
        usage=TokenUsage(input_tokens=10, output_tokens=5),
        model="m",
        seconds=0.25,
    )
    results = StoredToolResults(
        results=[
            ToolResult(tool_use_id="toolu_a", name="get_fleet_status", content="2 running"),
            ToolResult(
                tool_use_id="toolu_b", name="schedule_next_check", content="no", is_error=True
            ),
        ]
    )
    final = StoredReply(
        content=[{"type": "text", "text": "Fine — ✓.\n" + TAG.format(a="true", s="false")}],
        stop_reason="end_turn",
    )
    for model in (first, results, final):
        assert type(model).model_validate_json(dumps(model)) == model
    assert "✓" in dumps(final), "stored as UTF-8, not escaped"

    rows = [(0, "context text"), (1, dumps(first)), (2, dumps(results))]
    messages = api_messages(rows)
    assert messages == [
        {"role": "user", "content": "context text"},
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "2 running"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "no",
                    "is_error": True,
                },
            ],
        },
    ]
    assert validate_messages_request({"model": "m", "max_tokens": 1, "messages": messages}) is None
    assert tool_calls_of(first.content) == [
        ToolCall(id="toolu_a", name="get_fleet_status", input={}),
        ToolCall(
            id="toolu_b",
            name="schedule_next_check",
            input={"delay_seconds": 900, "reason": "loading"},
        ),
    ]
    assert reply_text(first.content) == "Let me look."
    assert parse_verdict(reply_text(final.content))[0] == Verdict(action=True, state_changed=False)


def test_tool_call_without_input_gets_an_empty_dict() -> None:
    content = [{"type": "tool_use", "id": "t", "name": "n", "input": None}]
    assert tool_calls_of(content) == [ToolCall(id="t", name="n", input={})]
    assert reply_text(content) == ""


def test_a_tool_call_with_a_non_dict_input_gets_an_empty_dict() -> None:
    content = [{"type": "tool_use", "id": "t", "name": "n", "input": '{"offer_id": 4'}]
    assert tool_calls_of(content) == [ToolCall(id="t", name="n", input={})]


def _reply(*blocks: dict[str, Any], stop: str = "end_turn") -> str:
    return dumps(StoredReply(content=list(blocks), stop_reason=stop))


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _thinking(signature: str, text: str = "") -> dict[str, Any]:
    return {"type": "thinking", "thinking": text, "signature": signature}


def test_thinking_blocks_go_back_byte_for_byte_in_their_order() -> None:
    """Within a tool-use cycle the assistant turn is echoed exactly as received
    (thinking-tool-workflows page): every block, its order, its strings."""
    use_a = {"type": "tool_use", "id": "toolu_a", "name": "get_fleet_status", "input": {}}
    use_b = {"type": "tool_use", "id": "toolu_b", "name": "search_offers", "input": {"limit": 3}}
    blocks = [
        _thinking("c2lnLTE=" * 40, "I should look at the fleet first.\n  "),
        {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk" * 30},
        _text("Looking. "),
        use_a,
        _thinking("c2lnLTI=" * 40),
        use_b,
    ]
    results = StoredToolResults(
        results=[
            ToolResult(tool_use_id="toolu_a", name="get_fleet_status", content="ok"),
            ToolResult(tool_use_id="toolu_b", name="search_offers", content="3 offers"),
        ]
    )
    rows = [(0, "context"), (1, _reply(*blocks, stop="tool_use")), (2, dumps(results))]
    messages = api_messages(rows)
    assert messages[1] == {"role": "assistant", "content": blocks}
    assert json.dumps(messages[1]["content"]) == json.dumps(blocks)
    assert reply_text(blocks) == "Looking.", "thinking is never read as the answer"


def test_a_paused_reply_is_followed_by_a_note_never_sent_as_a_prefill() -> None:
    rows = [(0, "context"), (1, _reply(_text("Looking. "), stop="pause_turn"))]
    messages = api_messages(rows)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"] == [_text("Looking. ")], "sent as stored"
    assert messages[2] == {"role": "user", "content": [_text(PAUSED_TEXT)]}
    assert validate_messages_request({"model": "m", "max_tokens": 1, "messages": messages}) is None


def test_a_continued_reply_follows_the_paused_one_after_the_note() -> None:
    """The note sits where it was when the continuation was asked for, so the
    continuation's thinking keeps the prefix it was given."""
    use = {"type": "tool_use", "id": "toolu_c", "name": "get_fleet_status", "input": {}}
    results = StoredToolResults(
        results=[ToolResult(tool_use_id="toolu_c", name="get_fleet_status", content="ok")]
    )
    paused = [
        (0, "context"),
        (1, _reply(_thinking("sig-1"), _text("First half."), stop="pause_turn")),
    ]
    rows = [*paused, (3, _reply(_thinking("sig-2"), use, stop="tool_use")), (4, dumps(results))]
    messages = api_messages(rows)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[: len(api_messages(paused))] == api_messages(paused)
    assert messages[3]["content"] == [_thinking("sig-2"), use]
    assert validate_messages_request({"model": "m", "max_tokens": 1, "messages": messages}) is None


def test_a_reply_cut_off_while_thinking_is_left_out_and_the_note_joins_the_user_turn() -> None:
    """max_tokens inside thinking leaves a block with no signature, which the
    API would refuse: nothing of that reply can go back."""
    cut = StoredToolResults(results=[], note="Your reply was cut off.")
    rows = [
        (0, "context"),
        (1, _reply(_thinking("", "Let me"), stop="max_tokens")),
        (2, dumps(cut)),
    ]
    messages = api_messages(rows)
    assert messages == [
        {"role": "user", "content": [_text("context"), _text("Your reply was cut off.")]}
    ]


def test_a_finished_runs_replies_are_settled_readable_small_and_never_sent() -> None:
    long = "I weigh the offers. " * 400  # 8,000 characters of summarised thinking
    reply = StoredReply(
        content=[
            _thinking("s" * 900, long),
            {"type": "redacted_thinking", "data": "d" * 600},
            _text("Done."),
        ],
        stop_reason="end_turn",
    )
    kept = settled(reply)
    assert kept is not None and settled(kept) is None, "settled once"
    thinking, redacted, text = kept.content
    assert thinking["thinking"] == long[:SETTLED_THINKING_CHARS] + "…"
    assert (thinking["signature"], thinking["settled_chars"]) == ("", 900)
    assert (redacted["data"], redacted["settled_chars"]) == ("", 600)
    assert text == _text("Done.")
    assert len(dumps(kept)) < len(dumps(reply)) // 2
    assert settled(StoredReply(content=[_text("No thinking.")], stop_reason="end_turn")) is None
    # Never sent again, whatever asks for it.
    rows = [(0, "context"), (1, dumps(kept)), (2, dumps(StoredToolResults(results=[])))]
    assert api_messages(rows)[1]["content"] == [_text("Done.")]


def test_folded_rounds_become_a_digest_after_the_context() -> None:
    use = {"type": "tool_use", "id": "toolu_f", "name": "destroy_instance", "input": {"id": 7}}
    results = StoredToolResults(
        results=[ToolResult(tool_use_id="toolu_f", name="destroy_instance", content="gone\nok")]
    )
    rows = [
        (0, "context"),
        (1, _reply(_thinking("sig"), _text("Releasing 7."), use, stop="tool_use")),
        (2, dumps(results)),
        (3, _reply(_thinking("sig-3"), _text("Done"), stop="model_context_window_exceeded")),
    ]
    messages = api_messages(rows, fold_upto=2)
    assert len(messages) == 1 and messages[0]["content"][0] == _text("context")
    digest = messages[0]["content"][1]["text"]
    assert digest.splitlines() == [
        FOLD_HEADING,
        "- round 1: you wrote: Releasing 7.",
        '- round 1: destroy_instance({"id":7}) → gone',
        "- round 2: you wrote: Done",
        "- round 2: your reply was cut off (model_context_window_exceeded)",
    ]


# ====================================================================== config patch


@pytest.mark.parametrize(
    "raw",
    [
        {"heartbeat_seconds": 5},
        {"heartbeat_seconds": 86_401},
        {"heartbeat_seconds": 30.5},
        {"history_token_budget": 10},
        {"max_rounds": 0},
        {"min_reliability": 1.5},
        {"target_proofs_per_hour": -1},
        {"p0_debounce_seconds": 0},
        {"max_instances": -1},
        {"paused": "maybe"},
        {"allowed_gpus": "RTX 4090"},
        {"not_proving_minutes": 1},
        {"not_proving_minutes": "soon"},
        {"min_release_age_minutes": -5},
        {"failed_host_ttl_hours": 10_000},
        {"failed_host_ttl_hours": True},
        {"llm_effort": "extreme"},
        {"llm_effort": "HIGH"},
        {"llm_effort": 3},
        {"llm_thinking_display": "full"},
        {"llm_thinking_display": True},
    ],
)
def test_invalid_values_are_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as err:
        ConfigPatch.model_validate(raw)
    assert next(iter(raw)) in str(err.value)


@pytest.mark.parametrize("raw", [{"no_such": 1}, {"heartbeat": 60}, {"paused": True, "x": 0}])
def test_unknown_keys_are_rejected(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        ConfigPatch.model_validate(raw)


def test_apply_changes_only_the_given_fields() -> None:
    base = AgentConfig(target_proofs_per_hour=100, heartbeat_seconds=600)
    patch = ConfigPatch.model_validate({"target_proofs_per_hour": 250, "allowed_gpus": ["A100"]})
    new = patch.apply(base)
    assert new.target_proofs_per_hour == 250 and new.allowed_gpus == ["A100"]
    assert new.model_dump(exclude={"target_proofs_per_hour", "allowed_gpus"}) == base.model_dump(
        exclude={"target_proofs_per_hour", "allowed_gpus"}
    )
    assert base.target_proofs_per_hour == 100, "the old config is not mutated"
    assert not patch.is_empty()


def test_empty_patch_changes_nothing() -> None:
    base = AgentConfig(heartbeat_seconds=45)
    assert ConfigPatch().is_empty()
    assert ConfigPatch().apply(base) == base


@pytest.mark.parametrize("raw", [{"heartbeat_seconds": 30}, {"heartbeat_seconds": 86_400}])
def test_boundary_values_are_accepted(raw: dict[str, Any]) -> None:
    assert ConfigPatch.model_validate(raw).apply(AgentConfig()).heartbeat_seconds == next(
        iter(raw.values())
    )


@pytest.mark.parametrize(
    "raw",
    [
        {"delay_seconds": "NaN", "reason": "r"},
        {"delay_seconds": 900, "reason": "r", "extra": 1},
        {"reason": "no delay"},
    ],
)
def test_bad_schedule_input_is_an_error_result_for_the_model(raw: dict[str, object]) -> None:
    result = parse_tool_input(ScheduleNextCheckInput, "toolu_1", "schedule_next_check", raw)
    assert isinstance(result, ToolResult) and result.is_error
    assert result.content.startswith("Invalid input for schedule_next_check:")


def test_good_tool_input_parses() -> None:
    args = parse_tool_input(CancelWakeInput, "toolu_1", "cancel_wake", {"wake_id": "w3-1"})
    assert isinstance(args, CancelWakeInput) and args.wake_id == "w3-1"
