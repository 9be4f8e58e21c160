"""Lay a request out for the Messages API's prompt cache.

The API caches a request's prefix up to each `cache_control` breakpoint, in
its render order (tools, then system, then messages), and a later request
whose prefix is byte-identical up to one of those points reads it back at a
tenth of the input price. A breakpoint finds an earlier entry up to 20 content
blocks before it, so one on the newest block also reads what the previous
request cached. At most four breakpoints per request; prefixes shorter than
the model's minimum (fleet_agent/llm/model_table.py) are not cached at all.

The request, from the most stable part to the least, with its breakpoints:

1. tools and the system instructions (the same for every run of an agent) —
   breakpoint A, on the system text;
2. the session summary (a second system block, fleet_agent/llm/compaction.py;
   there is none until runs leave the history window) — breakpoint B;
3. the history of earlier runs (fleet_agent/llm/history.py: only grows at its end
   between two moves of its start, which happen in blocks) — breakpoint C on
   its last message, so the next run reads the whole history back;
4. this run: its context message (the clock, target, limits, fleet) and its
   rounds so far — breakpoint D on the last message, so the next round reads
   the run's earlier rounds back.

A, B and C live an hour (`ttl` "1h", written at 2 × the input price, read at
0.1 ×): runs come at least a heartbeat (5 minutes by default) after the end
of the previous one, which outlives the default 5-minute entry. D lives 5
minutes: the rounds of a run follow each other within seconds, and the next
run never reads it (its own context message comes where this one's was). The
API wants entries with the longer TTL before the shorter ones: A, B, C, D.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "MAX_BREAKPOINTS",
    "RUN_TTL",
    "STABLE_TTL",
    "CacheTtl",
    "CachedRequest",
    "breakpoints",
    "cached_request",
]

CacheTtl = Literal["5m", "1h"]
MAX_BREAKPOINTS = 4
"""The Messages API refuses a request with more `cache_control` blocks (400)."""
STABLE_TTL: CacheTtl = "1h"
RUN_TTL: CacheTtl = "5m"


def _marker(ttl: CacheTtl) -> dict[str, str]:
    # "5m" is the API's default; it is sent without a ttl, as documented.
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


@dataclass(frozen=True)
class CachedRequest:
    """The parts of a Messages API request, with breakpoints placed."""

    system: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    messages: list[dict[str, Any]]


def _marked(message: dict[str, Any], ttl: CacheTtl) -> dict[str, Any]:
    """A copy of `message` whose last content block carries a breakpoint."""
    content = message["content"]
    blocks = (
        [{"type": "text", "text": content}]
        if isinstance(content, str)
        else [copy.deepcopy(b) for b in content]
    )
    blocks[-1] = {**blocks[-1], "cache_control": _marker(ttl)}
    return {**message, "content": blocks}


def cached_request(
    *,
    system: str,
    tools: Sequence[dict[str, Any]],
    history: Sequence[dict[str, Any]],
    current: Sequence[dict[str, Any]],
    summary: str = "",
    stable_ttl: CacheTtl = STABLE_TTL,
) -> CachedRequest:
    """The request of one round: `history` are the earlier runs' messages,
    `current` this run's messages so far (never empty). Nothing passed in is
    modified. `stable_ttl` is the TTL of breakpoints A–C (the benchmark
    compares "5m" with the default)."""
    if not current:
        raise ValueError("a request needs at least this run's context message")
    system_blocks: list[dict[str, Any]] = [
        {"type": "text", "text": system, "cache_control": _marker(stable_ttl)}
    ]
    if summary:
        system_blocks.append(
            {"type": "text", "text": summary, "cache_control": _marker(stable_ttl)}
        )
    old = [dict(m) for m in history]
    if old:
        old[-1] = _marked(old[-1], stable_ttl)
    now = [dict(m) for m in current]
    now[-1] = _marked(now[-1], RUN_TTL)
    return CachedRequest(system=system_blocks, tools=list(tools), messages=old + now)


def breakpoints(request: CachedRequest) -> list[tuple[str, int, int]]:
    """Where the request's breakpoints are: ("tools" | "system" | "messages",
    index, block index within a message or -1), in render order."""
    found: list[tuple[str, int, int]] = []
    found += [("tools", i, -1) for i, t in enumerate(request.tools) if "cache_control" in t]
    found += [("system", i, -1) for i, b in enumerate(request.system) if "cache_control" in b]
    for i, message in enumerate(request.messages):
        content = message["content"]
        if isinstance(content, list):
            found += [("messages", i, j) for j, b in enumerate(content) if "cache_control" in b]
    return found
