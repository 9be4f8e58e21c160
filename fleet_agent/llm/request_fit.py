"""The whole request within its budget and the model's window, before it is sent.

The history has its budget (fleet_agent/llm/history.py, with the summary's share
in fleet_agent/llm/compaction.py); this run's own messages (its context and its
rounds of tool calls and results) get a share as large (`run_share`).

A thinking model's blocks are bound to everything before them: a request
that changes an earlier message of the run (a tool result condensed, a
history run left out) makes every later thinking block of the run fail the
API's check ("The block is bound to a different conversation",
https://platform.claude.com/docs/en/build-with-claude/preserved-thinking).
So a request is shrunk only by *layouts* (`RequestLayout`): the layout of
the previous round's request is kept as it is, and when it no longer fits,
the whole run so far is folded into a digest in its context message
(fleet_agent/llm/transcript.py), which leaves no thinking block of the run to
echo; only then are the oldest history runs left out and the context cut.
The reply carries its layout, and the next round starts from it.

1. when this run's messages are over their share, the run so far is folded;
2. the whole request (system, tools, summary, history, this run) is counted
   when its estimate nears the window (fleet_agent/llm/token_count.py); over the
   model's window less the reply's `max_tokens`, the run is folded, then the
   oldest history runs are left out, a pair of messages at a time, then the
   context message is cut in the middle;
3. a request still over the window is never sent (`RequestTooLarge`).

A layout changes only requests, never the store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleet_agent.llm.prompt_cache import CachedRequest
from fleet_agent.llm.token_count import Count, RequestTokens
from fleet_agent.models import RequestLayout

__all__ = ["Fitted", "RequestTooLarge", "cut_context", "fit_request"]

_CUT_MARK = "\n[… cut here: the request was over the model's window …]\n"
_CUT_TRIES = 4

Build = Callable[[RequestLayout], CachedRequest]
"""The request of this round under a layout (history less the dropped runs,
the run with its folded rounds, the context cut), with cache breakpoints."""


class RequestTooLarge(ValueError):
    """Even folded and without history, the request exceeds the model's window."""


@dataclass(frozen=True)
class Fitted:
    request: CachedRequest
    tokens: int
    counted: bool  # False: the calibrated estimate
    layout: RequestLayout


def cut_context(messages: list[dict[str, Any]], keep: float) -> list[dict[str, Any]]:
    """`messages` with the text of the first one (the run's context) cut in
    the middle to `keep` of its length; a digest of folded rounds after it
    (a second text block) is kept whole."""
    if keep >= 1 or not messages:
        return messages
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
    build: Build,
    *,
    previous: RequestLayout,
    rounds: int,
    history_len: int,
    run_share: int,
    window: int,
    tokens: RequestTokens,
) -> Fitted:
    """This round's request within `run_share` for the run's messages and
    `window` for the whole. `previous` is the layout of the run's previous
    request, `rounds` how many rounds of the run are stored (so many can be
    folded), `history_len` how many history messages `build` is given."""
    layout = previous
    request = build(layout)

    async def measure() -> Count:
        return await tokens.measure(request.system, request.tools, request.messages, window=window)

    def fold_all() -> None:
        nonlocal layout, request
        layout = layout.model_copy(update={"folded_upto": rounds})
        request = build(layout)

    run_part = request.messages[history_len - min(layout.history_dropped, history_len) :]
    if layout.folded_upto < rounds and tokens.estimate([], [], run_part) > run_share:
        fold_all()
    count = await measure()
    if count.tokens > window and layout.folded_upto < rounds:
        fold_all()
        count = await measure()
    while count.tokens > window and layout.history_dropped < history_len:
        # A user message and its answer: roles keep alternating.
        dropped = min(layout.history_dropped + 2, history_len)
        layout = layout.model_copy(update={"history_dropped": dropped})
        request = build(layout)
        count = await measure()
    for _ in range(_CUT_TRIES):
        if count.tokens <= window:
            return Fitted(request, count.tokens, count.counted, layout)
        # 10 % below the proportional length: the estimate may be off.
        keep = max(layout.context_keep * window / count.tokens * 0.9, 1e-6)
        layout = layout.model_copy(update={"context_keep": keep})
        request = build(layout)
        count = await measure()
    if count.tokens > window:
        raise RequestTooLarge(
            f"the request has {count.tokens} tokens with this run folded, no history and "
            f"its context cut, over the model's window of {window}"
        )
    return Fitted(request, count.tokens, count.counted, layout)
