"""What a request may carry, for every model in the table: never a setting
Sonnet 5.5 refuses (its migration guide lists five that return a 400), the
thinking and effort each model takes, room to think in `max_tokens`; and a
conversation that never ends with an assistant message, whatever a run's
rounds were."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from fleet_agent.llm.base import LlmOptions
from fleet_agent.llm.model_table import EFFORTS, KNOWN_MODELS, known_info
from fleet_agent.llm.request import (
    FORBIDDEN_FIELDS,
    THINKING_ROOM,
    PrefillRefused,
    build_request,
    effective_effort,
    longest_reply,
    reply_budget,
)
from fleet_agent.llm.transcript import (
    PAUSED_TEXT,
    StoredReply,
    StoredToolResults,
    api_messages,
    assistant_seq,
    dumps,
    tool_results_seq,
)
from fleet_agent.models import ToolResult
from testkit.fakes.anthropic_models import behaviour
from testkit.fakes.anthropic_validation import validate_messages_request

ALLOWED = {"model", "max_tokens", "messages", "system", "tools", "thinking", "output_config"}
TOOLS = [{"name": "get_fleet_status", "input_schema": {"type": "object"}}]
USER = [{"role": "user", "content": "hello"}]
OPTIONS = [
    LlmOptions(effort=effort, thinking_display=display)
    for effort in (*EFFORTS, None)
    for display in ("omitted", "summarized")
]


@pytest.mark.parametrize("model", sorted(KNOWN_MODELS))
def test_no_model_is_ever_sent_what_sonnet_5_5_refuses(model: str) -> None:
    info = KNOWN_MODELS[model]
    for options, tools in itertools.product(OPTIONS, ([], TOOLS)):
        request = build_request(
            model, info, system="sys", messages=USER, tools=tools, max_tokens=100, options=options
        )
        assert set(request) <= ALLOWED and not set(request) & FORBIDDEN_FIELDS
        thinking = request.get("thinking")
        if info.adaptive_thinking:
            # Never "disabled", never "enabled" with a budget.
            assert thinking == {"type": "adaptive", "display": options.thinking_display}
        else:
            assert thinking is None, "an older model gets no thinking field"
        effort = request.get("output_config", {}).get("effort")
        if info.efforts and options.effort is not None:
            assert effort in info.efforts
        else:
            assert "output_config" not in request
        with pytest.raises(PrefillRefused):
            build_request(
                model,
                info,
                system="sys",
                messages=[*USER, {"role": "assistant", "content": "Sure,"}],
                tools=tools,
                max_tokens=100,
                options=options,
            )


@pytest.mark.parametrize("model", sorted(KNOWN_MODELS))
def test_the_documented_api_accepts_every_request_built_for_every_model(model: str) -> None:
    """The fake Messages API's per-model checks follow Anthropic's pages, not
    this code (testkit/fakes/anthropic_models.py): each request built for a
    model of the table passes them, summariser's (low effort, no tools) and
    runs' alike, at the largest budget a config allows."""
    info = KNOWN_MODELS[model]
    for options, tools in itertools.product(OPTIONS, ([], TOOLS)):
        budget = reply_budget(info, 64_000, options.effort)
        request = build_request(
            model,
            info,
            system="sys",
            messages=USER,
            tools=tools,
            max_tokens=budget,
            options=options,
        )
        assert behaviour(model).known, f"the fake has no entry for {model}"
        assert validate_messages_request(request) is None, (model, options)


def test_effort_falls_to_the_highest_level_a_model_takes() -> None:
    sonnet_4_6, sonnet_4_5 = KNOWN_MODELS["claude-sonnet-4-6"], KNOWN_MODELS["claude-sonnet-4-5"]
    assert effective_effort(sonnet_4_6, "xhigh") == "high"
    assert effective_effort(sonnet_4_6, "max") == "max"
    assert effective_effort(sonnet_4_5, "low") is None
    assert effective_effort(KNOWN_MODELS["claude-sonnet-5-5"], "xhigh") == "xhigh"
    assert effective_effort(known_info("a-model-the-table-lacks"), "high") is None


def test_a_thinking_model_gets_room_to_think_within_its_output_limit() -> None:
    sonnet = KNOWN_MODELS["claude-sonnet-5-5"]
    assert reply_budget(sonnet, 4_096, "medium") == 4_096 + THINKING_ROOM["medium"]
    assert reply_budget(sonnet, 64_000, "max") == 64_000 + THINKING_ROOM["max"]
    assert reply_budget(sonnet, 120_000, "max") == sonnet.max_output_tokens
    assert reply_budget(KNOWN_MODELS["claude-haiku-4-5"], 4_096, "max") == 4_096
    # No model given (the workflow's timeout): the most any model may write.
    assert longest_reply(4_096, "low") == 4_096 + THINKING_ROOM["low"]
    # A provider without a model table entry (the autopilot): the answer alone.
    assert reply_budget(None, 4_096, "low") == 4_096


# Each round of a run, as the run workflow leaves it in the store.
_THINK = {"type": "thinking", "thinking": "", "signature": "c2ln"}
_SHAPES: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "tools": ("tool_use", [_THINK, {"type": "tool_use", "id": "T", "name": "n", "input": {}}]),
    "paused": ("pause_turn", [_THINK, {"type": "text", "text": "Half way. "}]),
    "cut thinking": ("max_tokens", [{"type": "thinking", "thinking": "Let", "signature": ""}]),
    "cut text": ("max_tokens", [_THINK, {"type": "text", "text": "I will"}]),
    "window": ("model_context_window_exceeded", [_THINK, {"type": "text", "text": "x"}]),
}


def _rows(shapes: tuple[str, ...]) -> list[tuple[int, str]]:
    """The stored rows of a run whose rounds had these shapes, as the run
    workflow stores them (tool results after a tool call, a note after a reply
    cut without one, nothing after a pause or a full window)."""
    rows: list[tuple[int, str]] = [(0, "context")]
    for rnd, shape in enumerate(shapes, start=1):
        stop, blocks = _SHAPES[shape]
        content = [{**b, "id": f"T{rnd}"} if b.get("type") == "tool_use" else b for b in blocks]
        rows.append((assistant_seq(rnd), dumps(StoredReply(content=content, stop_reason=stop))))
        if shape == "tools":
            result = ToolResult(tool_use_id=f"T{rnd}", name="n", content="ok")
            rows.append((tool_results_seq(rnd), dumps(StoredToolResults(results=[result]))))
        elif shape.startswith("cut"):
            note = StoredToolResults(results=[], note="Your reply was cut off.")
            rows.append((tool_results_seq(rnd), dumps(note)))
    return rows


def test_no_run_of_any_shape_ends_with_an_assistant_message_or_breaks_the_turns() -> None:
    """Every sequence of up to four rounds of every shape, at every fold point:
    the messages alternate, end with a user turn, and carry every signed
    thinking block of the rounds not folded, in order."""
    checked = 0
    for n in range(5):
        for shapes in itertools.product(_SHAPES, repeat=n):
            rows = _rows(shapes)
            for fold in range(n + 1):
                messages = api_messages(rows, fold_upto=fold)
                body: dict[str, Any] = {"model": "m", "max_tokens": 1, "messages": messages}
                assert validate_messages_request(body) is None, (shapes, fold)
                assert messages[-1]["role"] == "user", (shapes, fold)
                signed = [
                    b
                    for m in messages
                    if m["role"] == "assistant"
                    for b in m["content"]
                    if b.get("type") == "thinking"
                ]
                assert all(b["signature"] for b in signed), "an unsigned block never goes back"
                kept = sum(1 for s in shapes[fold:] if s != "cut thinking")
                assert len(signed) == kept, (shapes, fold)
                build_request(
                    "claude-sonnet-5-5",
                    KNOWN_MODELS["claude-sonnet-5-5"],
                    system="sys",
                    messages=messages,
                    tools=TOOLS,
                    max_tokens=100,
                    options=LlmOptions(),
                )
                checked += 1
    assert checked > 3_000
    assert PAUSED_TEXT in str(api_messages(_rows(("paused",))))
