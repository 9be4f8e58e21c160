"""The fake Messages API's streaming wire format: a message as the real API's
server-sent events, and tool input JSON cut off the way `max_tokens` cuts it.

Pure functions; the server (anthropic_server.py) writes what they return. The
event names and payloads follow the API's streaming reference: `message_start`
(the message with empty content), per block `content_block_start`, deltas
(`text_delta`, or `input_json_delta` after an empty first one), and
`content_block_stop`, a `ping` after the first block starts, then
`message_delta` (stop reason, cumulative output tokens) and `message_stop`. An
error inside a stream is an `error` event.

Thinking (SDK anthropic/types/thinking_delta.py, signature_delta.py and the
accumulator in anthropic/lib/streaming/_messages.py): a `thinking` block
starts empty (``"thinking": "", "signature": ""``), its text comes in
`thinking_delta` events ("Concatenate the `thinking` values of successive
`thinking_delta` events"; none when the text is empty, as display "omitted"
"streams `thinking` blocks with empty text",
https://github.com/anthropics/skills/blob/9d2f1ae187231d8199c64b5b762e1bdf2244733d/skills/claude-api/SKILL.md)
and its signature in one `signature_delta` "just before the block's
`content_block_stop` event" — not at all for a block cut by `max_tokens`,
whose signature stays empty. A `redacted_thinking` block starts whole and
stops. `message_delta`'s usage carries ``output_tokens_details`` (SDK
anthropic/types/message_delta_usage.py).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["Event", "cut_json", "encode_event", "message_events"]

Event = tuple[str, dict[str, Any]]
"""(event name, data payload)."""


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def cut_json(tool_input: dict[str, Any], at: int | None) -> tuple[str, dict[str, Any]]:
    """The input's JSON cut after `at` characters (None → half of it), and the
    input made of the keys whose values are complete within the cut — what a
    client that parses partial JSON makes of it."""
    text = json.dumps(tool_input)
    cut = len(text) // 2 if at is None else max(0, min(at, len(text) - 1))
    partial: dict[str, Any] = {}
    for key, value in tool_input.items():
        attempt = {**partial, key: value}
        if len(json.dumps(attempt)) - 1 > cut:  # without its closing brace
            break
        partial = attempt
    return text[:cut], partial


def message_events(
    message: dict[str, Any],
    tool_json: dict[int, str],
    chunk_chars: int,
) -> list[Event]:
    """The stream of `message` (a complete non-streaming response body).

    `tool_json` gives, per content index, the tool input JSON text to stream
    when it differs from the block's input (a cut one); `chunk_chars` is the
    size of each text or JSON delta.
    """
    usage = dict(message["usage"])
    details = usage.pop("output_tokens_details", None)
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    events: list[Event] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            pieces = _pieces(block["text"], chunk_chars)
            deltas = [{"type": "text_delta", "text": p} for p in pieces]
        elif block["type"] == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            text = block["thinking"]
            deltas = [
                {"type": "thinking_delta", "thinking": p} for p in _pieces(text, chunk_chars) if p
            ]
            if block["signature"]:
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "redacted_thinking":
            opening = dict(block)
            deltas = []
        else:
            opening = {**block, "input": {}}
            text = tool_json.get(index, json.dumps(block["input"]))
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            if text:
                deltas += [
                    {"type": "input_json_delta", "partial_json": p}
                    for p in _pieces(text, chunk_chars)
                ]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        if index == 0:
            events.append(("ping", {"type": "ping"}))
        events += [
            ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
            for d in deltas
        ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {
                    "output_tokens": usage["output_tokens"],
                    **({"output_tokens_details": details} if details is not None else {}),
                },
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def encode_event(name: str, data: dict[str, Any]) -> bytes:
    """One server-sent event on the wire."""
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
