"""The whole request within its budget and the model's window, before it is sent.

The history has its budget (fleet_agent/history.py, with the summary's share
in fleet_agent/compaction.py); this run's own messages (its context and its
rounds of tool calls and results) get a share as large (`run_share`). Then:

1. when this run's messages are over their share, its older tool results are
   condensed to one line each (the newest round's results stay whole: the
   model is reading them now);
2. the whole request (system, tools, summary, history, this run) is counted
   when its estimate nears the window (fleet_agent/token_count.py); over
   the model's window less the reply's `max_tokens`, every tool result of
   the run is condensed, then the oldest history runs are left out, a pair
   of messages at a time;
3. a request still over the window is never sent (`RequestTooLarge`).

Condensing and leaving runs out change only this request, never the store:
the next round starts again from the stored messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleet_agent.prompt_cache import CachedRequest
from fleet_agent.token_count import RequestTokens

__all__ = ["CONDENSED_CHARS", "Fitted", "RequestTooLarge", "condense_tool_results", "fit_request"]

_CUT_MARK = "\n[… cut here: the request was over the model's window …]\n"
_CUT_TRIES = 4
CONDENSED_CHARS = 200
"""A condensed tool result keeps the first line of its text, up to this many characters."""


class RequestTooLarge(ValueError):
    """Even condensed and without history, the request exceeds the model's window."""


@dataclass(frozen=True)
class Fitted:
    request: CachedRequest
    tokens: int
    counted: bool  # False: the calibrated estimate
    condensed: int = 0  # tool results condensed
    history_dropped: int = 0  # history messages left out


def _condensed_block(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content", "")
    if isinstance(content, list):
        content = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    text = str(content)
    first = (text.strip().splitlines() or [""])[0][:CONDENSED_CHARS]
    if first == text.strip():
        return block
    return {**block, "content": f"{first} [condensed: {len(text)} chars]"}


def condense_tool_results(
    messages: Sequence[dict[str, Any]], *, keep_last: bool
) -> tuple[list[dict[str, Any]], int]:
    """`messages` with each tool result cut to a line (the last message's kept
    when `keep_last`), and how many were cut. Nothing passed in is modified."""
    out: list[dict[str, Any]] = []
    cut = 0
    last = len(messages) - 1
    for i, message in enumerate(messages):
        content = message.get("content")
        if (
            message.get("role") != "user"
            or not isinstance(content, list)
            or (keep_last and i == last)
        ):
            out.append(message)
            continue
        blocks = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                new = _condensed_block(block)
                cut += new is not block
                blocks.append(new)
            else:
                blocks.append(block)
        out.append({**message, "content": blocks})
    return out, cut


def _cut_context(messages: list[dict[str, Any]], keep: float) -> list[dict[str, Any]]:
    """`messages` with the text of the first one (the run's context) cut in
    the middle to `keep` of its length."""
    first = messages[0]
    content = first["content"]
    text = content if isinstance(content, str) else str(content[0].get("text", ""))
    chars = max(int(len(text) * keep) - len(_CUT_MARK), 0)
    head = chars // 2
    cut = text[:head] + _CUT_MARK + text[len(text) - (chars - head) :]
    if isinstance(content, str):
        return [{**first, "content": cut}, *messages[1:]]
    return [{**first, "content": [{**content[0], "text": cut}, *content[1:]]}, *messages[1:]]


async def fit_request(
    request: CachedRequest,
    history_len: int,
    *,
    run_share: int,
    window: int,
    tokens: RequestTokens,
) -> Fitted:
    """`request` (its first `history_len` messages are earlier runs) within
    `run_share` for this run's messages and `window` for the whole."""
    history = list(request.messages[:history_len])
    current = list(request.messages[history_len:])
    condensed = 0
    if tokens.estimate([], [], current) > run_share:
        current, condensed = condense_tool_results(current, keep_last=True)
    fitted = replace(request, messages=history + current)
    count = await tokens.measure(fitted.system, fitted.tools, fitted.messages, window=window)
    if count.tokens > window:
        current, more = condense_tool_results(current, keep_last=False)
        condensed += more
    dropped = 0
    while count.tokens > window:
        fitted = replace(request, messages=history[dropped:] + current)
        count = await tokens.measure(fitted.system, fitted.tools, fitted.messages, window=window)
        if count.tokens <= window or dropped >= len(history):
            break
        dropped += 2  # a user message and its answer: roles keep alternating
    for _ in range(_CUT_TRIES):
        if count.tokens <= window:
            return Fitted(fitted, count.tokens, count.counted, condensed, dropped)
        # 10 % below the proportional length: the estimate may be off.
        current = _cut_context(current, window / count.tokens * 0.9)
        fitted = replace(request, messages=current)
        count = await tokens.measure(fitted.system, fitted.tools, fitted.messages, window=window)
    if count.tokens > window:
        raise RequestTooLarge(
            f"the request has {count.tokens} tokens with every tool result condensed, "
            f"no history and its context cut, over the model's window of {window}"
        )
    return Fitted(fitted, count.tokens, count.counted, condensed, dropped)
