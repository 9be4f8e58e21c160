"""How a run's messages are stored and turned back into API messages.

Sequence numbers inside a run: 0 is the context (the first user message),
2r-1 the assistant reply of round r, 2r the tool results of round r. They are
the natural key that makes every write idempotent under activity retries.

A stored reply keeps every block the model wrote, thinking and
redacted_thinking included, byte for byte: within a run's tool-use cycle the
assistant turn goes back exactly as it came ("Echo the assistant message
exactly as received: rebuilding the message or filtering out
redacted_thinking blocks triggers a 400 error",
https://platform.claude.com/docs/en/build-with-claude/thinking-tool-workflows).
Only this run's replies are sent back; earlier runs enter the prompt as their
final text and a digest of their fleet changes (fleet_agent/llm/history.py),
each change with the note the model wrote before it (`notes_before_calls`),
which Sonnet 5.5 writes in a thinking block ("text between tool calls comes
back in thinking blocks",
https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5);
their signed thinking never goes back. So once a run has
its final answer, its replies are *settled* (`settled`): the signatures and
encrypted data that only the API can read are dropped and a summarised
thinking is capped, which keeps the transcript readable and its size small.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from fleet_agent.models import RequestLayout, TokenUsage, ToolCall, ToolResult

__all__ = [
    "CONTEXT_SEQ",
    "DIGEST_CHARS",
    "FOLD_HEADING",
    "PAUSED_TEXT",
    "SETTLED_THINKING_CHARS",
    "StoredReply",
    "StoredToolResults",
    "api_messages",
    "assistant_seq",
    "notes_before_calls",
    "reply_text",
    "settled",
    "tool_calls_of",
    "tool_results_seq",
]

CONTEXT_SEQ = 0

PAUSED_TEXT = "Your reply was paused before it ended. Continue it from where it stopped."
"""The user message that continues a paused turn (`pause_turn`). The API's
stop-reason page says to send the paused reply back to continue it, but a
conversation that ends with an assistant message is a prefill, which Sonnet
5.5 refuses ("This model does not support assistant message prefill. The
conversation must end with a user message."); its family's migration guides
say to end with a user turn instead. So every model gets this note after a
paused reply (docs/DECISIONS.md, "Thinking round trip")."""


def assistant_seq(round_: int) -> int:
    return 2 * round_ - 1


def tool_results_seq(round_: int) -> int:
    return 2 * round_


FOLD_HEADING = "## Earlier in this run (folded to fit the context; call tools again for details)"
DIGEST_CHARS = 200
"""A folded round keeps each tool call's arguments, result and text to this
many characters (their first line)."""


class StoredReply(BaseModel):
    """An assistant reply as the store keeps it (kind 'assistant'): its blocks
    as the API returned them, and the layout its request was made under."""

    content: list[dict[str, Any]]
    stop_reason: str
    usage: TokenUsage = Field(default_factory=TokenUsage)
    model: str = ""
    seconds: float = 0.0
    layout: RequestLayout = Field(default_factory=RequestLayout)


class StoredToolResults(BaseModel):
    """The tool results of one round as the store keeps them (kind 'tool_results'),
    with an optional note to the model after them."""

    results: list[ToolResult]
    note: str = ""


def reply_text(content: list[dict[str, Any]]) -> str:
    return "\n".join(b.get("text", "") for b in content if b.get("type") == "text").strip()


def _written(block: dict[str, Any]) -> str:
    """What the model wrote in a text block or a thinking block ("" for a
    thinking block sent with display "omitted", and for any other block)."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", "")).strip()
    if kind == "thinking":
        return str(block.get("thinking", "")).strip()
    return ""


def notes_before_calls(content: list[dict[str, Any]]) -> dict[str, str]:
    """tool_use id → the last thing the model wrote before that call in its
    reply (a text or thinking block), as one line of at most `DIGEST_CHARS`;
    a call with nothing written before it has no entry."""
    notes: dict[str, str] = {}
    note = ""
    for block in content:
        if written := _written(block):
            note = _line(written)
        elif block.get("type") == "tool_use" and note:
            notes[str(block.get("id", ""))] = note
    return notes


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


SETTLED_THINKING_CHARS = 4_000
"""The most of a summarised thinking block a settled reply keeps."""


def settled(reply: StoredReply) -> StoredReply | None:
    """`reply` as a finished run keeps it: each thinking block's text capped at
    `SETTLED_THINKING_CHARS`, its signature (and a redacted block's data)
    dropped, their length kept in `settled_chars`; None when there is nothing
    to settle (no thinking, or settled already). A settled block can never be
    sent back (`_sendable`): only a run's own later rounds send its blocks,
    and a finished run has none; an attempt after a reset reuses the stored
    replies without asking the model again."""
    changed = False
    content: list[dict[str, Any]] = []
    for block in reply.content:
        kind = block.get("type")
        if kind not in ("thinking", "redacted_thinking") or "settled_chars" in block:
            content.append(block)
            continue
        changed = True
        if kind == "redacted_thinking":
            content.append({**block, "data": "", "settled_chars": len(str(block.get("data", "")))})
            continue
        text = str(block.get("thinking", ""))
        if len(text) > SETTLED_THINKING_CHARS:
            text = text[:SETTLED_THINKING_CHARS] + "…"
        sig = str(block.get("signature", ""))
        content.append({**block, "thinking": text, "signature": "", "settled_chars": len(sig)})
    return reply.model_copy(update={"content": content}) if changed else None


def _sendable(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks of a reply that can go back: all of them, less a thinking
    block cut off by `max_tokens` before its signature arrived (the API
    checks every thinking block's signature, and there is none) and a settled
    block."""
    return [
        b
        for b in content
        if "settled_chars" not in b and (b.get("type") != "thinking" or b.get("signature"))
    ]


def _add_user(messages: list[dict[str, Any]], blocks: list[dict[str, Any]]) -> None:
    """Append a user message, or extend the last one if it is a user's (a reply
    with nothing that can go back leaves two user messages in a row)."""
    if messages and messages[-1]["role"] == "user":
        last = messages[-1]["content"]
        head = [{"type": "text", "text": last}] if isinstance(last, str) else list(last)
        messages[-1] = {"role": "user", "content": [*head, *blocks]}
    else:
        messages.append({"role": "user", "content": blocks})


def _line(text: str) -> str:
    first = (text.strip().splitlines() or [""])[0]
    return first if len(first) <= DIGEST_CHARS else first[: DIGEST_CHARS - 1] + "…"


def _folded(rows: list[tuple[int, str]], upto: int) -> str:
    """Rounds 1..upto of a run as lines of text, in the order of each reply:
    what the model thought (a summarised thinking block: Sonnet 5.5 writes
    its text between tool calls there), what it wrote, and what it called,
    with what result (the first line, but the newest round's whole)."""
    lines = [FOLD_HEADING]
    results: dict[str, str] = {}
    for seq, content in rows:
        if seq != CONTEXT_SEQ and seq % 2 == 0 and seq // 2 <= upto:
            for r in StoredToolResults.model_validate_json(content).results:
                # The newest round's results whole: the model is reading them now.
                text = r.content.strip() if seq // 2 == upto else _line(r.content)
                results[r.tool_use_id] = ("error: " if r.is_error else "") + text
    for seq, content in rows:
        if seq % 2 == 0 or (seq + 1) // 2 > upto:
            continue
        rnd = (seq + 1) // 2
        reply = StoredReply.model_validate_json(content)
        for block in reply.content:
            if written := _written(block):
                said = "you thought" if block.get("type") == "thinking" else "you wrote"
                lines.append(f"- round {rnd}: {said}: {_line(written)}")
            for call in tool_calls_of([block]):
                args = _line(json.dumps(call.input, ensure_ascii=False, separators=(",", ":")))
                outcome = results.get(call.id, "not run")
                lines.append(f"- round {rnd}: {call.name}({args}) → {outcome}")
        if reply.stop_reason not in ("end_turn", "tool_use", "stop_sequence"):
            lines.append(f"- round {rnd}: your reply was cut off ({reply.stop_reason})")
    return "\n".join(lines)


def api_messages(rows: list[tuple[int, str]], *, fold_upto: int = 0) -> list[dict[str, Any]]:
    """(seq, content) rows of one run, in seq order → Messages API messages.

    Each reply goes back as it was stored (`_sendable`). A reply that is not
    followed by the round's tool results (it stopped with `pause_turn`) is
    followed by `PAUSED_TEXT`, so the conversation never ends with an
    assistant message and two replies never make one message; the note sits
    at the same place in every later round, so the prefix the model's
    thinking was given stays the same.

    Rounds 1..`fold_upto` are not turns: their digest (`_folded`) follows the
    context in the first user message, and the conversation goes on from
    round `fold_upto` + 1.
    """
    messages: list[dict[str, Any]] = []
    for seq, content in rows:
        if seq == CONTEXT_SEQ:
            messages.append({"role": "user", "content": content})
            if fold_upto > 0:
                _add_user(messages, [{"type": "text", "text": _folded(rows, fold_upto)}])
        elif (seq + 1) // 2 <= fold_upto:
            continue  # in the digest
        elif seq % 2 == 1:
            if messages and messages[-1]["role"] == "assistant":
                _add_user(messages, [{"type": "text", "text": PAUSED_TEXT}])
            blocks = _sendable(StoredReply.model_validate_json(content).content)
            if blocks:
                messages.append({"role": "assistant", "content": blocks})
        else:
            results = StoredToolResults.model_validate_json(content)
            _add_user(messages, _tool_result_blocks(results))
    if messages and messages[-1]["role"] == "assistant":
        _add_user(messages, [{"type": "text", "text": PAUSED_TEXT}])
    return messages


def dumps(model: BaseModel) -> str:
    return json.dumps(model.model_dump(mode="json"), ensure_ascii=False)
