"""How a run's messages are stored and turned back into API messages.

Sequence numbers inside a run: 0 is the context (the first user message),
2r-1 the assistant reply of round r, 2r the tool results of round r. They are
the natural key that makes every write idempotent under activity retries.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from fleet_agent.models import TokenUsage, ToolCall, ToolResult

__all__ = [
    "CONTEXT_SEQ",
    "StoredReply",
    "StoredToolResults",
    "api_messages",
    "assistant_seq",
    "reply_text",
    "tool_calls_of",
    "tool_results_seq",
]

CONTEXT_SEQ = 0


def assistant_seq(round_: int) -> int:
    return 2 * round_ - 1


def tool_results_seq(round_: int) -> int:
    return 2 * round_


class StoredReply(BaseModel):
    """An assistant reply as the store keeps it (kind 'assistant')."""

    content: list[dict[str, Any]]
    stop_reason: str
    usage: TokenUsage = Field(default_factory=TokenUsage)
    model: str = ""
    seconds: float = 0.0


class StoredToolResults(BaseModel):
    """The tool results of one round as the store keeps them (kind 'tool_results'),
    with an optional note to the model after them."""

    results: list[ToolResult]
    note: str = ""


def reply_text(content: list[dict[str, Any]]) -> str:
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text").strip()


def tool_calls_of(content: list[dict[str, Any]]) -> list[ToolCall]:
    """The tool_use blocks as calls. A reply cut by max_tokens may hold a call
    whose input is partial (complete keys only) or missing: kept as given, or
    empty; whether to run such a call is the caller's decision."""
    calls = []
    for b in content:
        if b.get("type") != "tool_use":
            continue
        raw_input = b.get("input")
        calls.append(
            ToolCall(
                id=str(b.get("id", "")),
                name=str(b.get("name", "")),
                input=raw_input if isinstance(raw_input, dict) else {},
            )
        )
    return calls


def _tool_result_blocks(stored: StoredToolResults) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [
        {
            "type": "tool_result",
            "tool_use_id": r.tool_use_id,
            "content": r.content,
            **({"is_error": True} if r.is_error else {}),
        }
        for r in stored.results
    ]
    if stored.note:
        # After the results: the API wants tool_result blocks first.
        blocks.append({"type": "text", "text": stored.note})
    return blocks


def _without_trailing_whitespace(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The API refuses a final assistant message whose last text ends in whitespace."""
    content = list(content)
    while content and content[-1].get("type") == "text":
        text = str(content[-1].get("text", "")).rstrip()
        if text:
            content[-1] = {**content[-1], "text": text}
            break
        content.pop()  # nothing but whitespace: an empty text block is refused too
    return content


def api_messages(rows: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """(seq, content) rows of one run, in seq order → Messages API messages.

    A run may end with an assistant reply (one that stopped with `pause_turn`
    or `max_tokens` and is sent back so the model continues it): the API then
    continues that turn, so the message list may end with an assistant message,
    and its trailing whitespace is trimmed as the API requires. A reply that
    continued an earlier one (no tool results in between) is part of the same
    turn: the two are merged into one assistant message, keeping roles
    alternating.
    """
    messages: list[dict[str, Any]] = []
    for seq, content in rows:
        if seq == CONTEXT_SEQ:
            messages.append({"role": "user", "content": content})
        elif seq % 2 == 1:
            reply = StoredReply.model_validate_json(content)
            if messages and messages[-1]["role"] == "assistant":
                messages[-1]["content"] = [*messages[-1]["content"], *reply.content]
            else:
                messages.append({"role": "assistant", "content": list(reply.content)})
        else:
            results = StoredToolResults.model_validate_json(content)
            messages.append({"role": "user", "content": _tool_result_blocks(results)})
    if messages and messages[-1]["role"] == "assistant":
        messages[-1]["content"] = _without_trailing_whitespace(messages[-1]["content"])
    return messages


def dumps(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False)
