"""A run's transcript as stored and sent back (`fleet_agent.llm.transcript`):
round trips, thinking blocks echoed exactly, paused and cut replies, settled
and folded rounds. Pure: no server."""

from __future__ import annotations

import json
from typing import Any

from fleet_agent.llm.transcript import (
    FOLD_HEADING,
    PAUSED_TEXT,
    SETTLED_THINKING_CHARS,
    StoredReply,
    StoredToolResults,
    api_messages,
    assistant_seq,
    dumps,
    notes_before_calls,
    reply_text,
    settled,
    tool_calls_of,
    tool_results_seq,
)
from fleet_agent.llm.verdict import parse_verdict
from fleet_agent.models import TokenUsage, ToolCall, ToolResult, Verdict
from testkit.fakes import validate_messages_request
from tests.helpers.loop import TAG


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


def test_a_folded_round_keeps_the_text_sonnet_5_5_writes_in_thinking_blocks() -> None:
    """Sonnet 5.5's text between tool calls comes back in thinking blocks:
    the digest of a folded round keeps it, in its place between the calls
    (an omitted block, with no text, adds no line)."""
    first = {"type": "tool_use", "id": "toolu_1", "name": "get_fleet_status", "input": {}}
    second = {"type": "tool_use", "id": "toolu_2", "name": "destroy_instance", "input": {"id": 7}}
    results = StoredToolResults(
        results=[
            ToolResult(tool_use_id="toolu_1", name="get_fleet_status", content="7 idle"),
            ToolResult(tool_use_id="toolu_2", name="destroy_instance", content="gone"),
        ]
    )
    content = [
        _thinking("s1", "The target is met; one machine is idle.\nMore lines."),
        _thinking("s2"),
        first,
        _thinking("s3", "Machine 7 has been idle an hour: releasing it."),
        second,
    ]
    rows = [(0, "context"), (1, _reply(*content, stop="tool_use")), (2, dumps(results))]
    digest = api_messages(rows, fold_upto=1)[0]["content"][1]["text"]
    assert digest.splitlines() == [
        FOLD_HEADING,
        "- round 1: you thought: The target is met; one machine is idle.",
        "- round 1: get_fleet_status({}) → 7 idle",
        "- round 1: you thought: Machine 7 has been idle an hour: releasing it.",
        '- round 1: destroy_instance({"id":7}) → gone',
    ]
    assert notes_before_calls(content) == {
        "toolu_1": "The target is met; one machine is idle.",
        "toolu_2": "Machine 7 has been idle an hour: releasing it.",
    }
    assert notes_before_calls([_thinking("s"), first]) == {}
