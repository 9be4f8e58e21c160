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
    return [
        ToolCall(id=b["id"], name=b["name"], input=b.get("input") or {})
        for b in content
        if b.get("type") == "tool_use"
    ]


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


def api_messages(rows: list[tuple[int, str]]) -> list[dict[str, Any]]:
    """(seq, content) rows of one run, in seq order → Messages API messages."""
    messages: list[dict[str, Any]] = []
    for seq, content in rows:
        if seq == CONTEXT_SEQ:
            messages.append({"role": "user", "content": content})
        elif seq % 2 == 1:
            reply = StoredReply.model_validate_json(content)
            messages.append({"role": "assistant", "content": reply.content})
        else:
            results = StoredToolResults.model_validate_json(content)
            messages.append({"role": "user", "content": _tool_result_blocks(results)})
    return messages


def dumps(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False)
