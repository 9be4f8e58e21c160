"""The session's earlier runs in the prompt: which ones, within the budget, in blocks.

Each earlier in-prompt run of the session contributes its trigger block and
its final message (plus a digest of its actions); no-op runs are not in the
history at all (the store marks them ``in_prompt = false``). A hard token
budget is enforced here, deterministically: the oldest runs go first, and a
single oversized entry is cut in the middle, so the prompt can never overflow
the way a failed compaction let it. The runs given are those after the
session's summary, and the budget is the window's share of
`history_token_budget` (fleet_agent/llm/compaction.py); the runs that leave are
folded into the next summary.

**Blocks, for the prompt cache.** The history is the long, stable part of the
request's cached prefix (fleet_agent/llm/prompt_cache.py). A window that drops the
oldest run whenever a new one comes in would change the prefix's first
history message on every run and defeat the cache. So the window's start only
ever lands on a *block start*: the session's runs are cut into blocks of about
a quarter of the budget each (by their cumulative token cost from the first
run given, the first after the summary, so a run's block never changes while
the summary stays the same), and
the window starts at the oldest block whose runs, with everything after them,
fit the budget. Between two moves of the start the history only grows at its
end, byte for byte the same before it; the start moves once per quarter
budget of new history, dropping a whole block. The price: after a move the
history holds between about three quarters and all of the budget, not always
all of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import accumulate
from typing import Any, Protocol

from fleet_agent.llm.prompt import estimate_tokens, format_time

__all__ = [
    "BLOCKS_PER_BUDGET",
    "HistoryLike",
    "TrimmedHistory",
    "block_starts",
    "entry_texts",
    "history_messages",
    "window_start",
]

BLOCKS_PER_BUDGET = 4
"""History blocks are 1/4 of `history_token_budget`: the window's start moves
once per quarter budget of new history, and keeps ≥ ~3/4 of the budget."""

_CUT_MARK = "\n[… cut to fit the history budget …]\n"


class HistoryLike(Protocol):
    """What the prompt needs of an earlier run (the store's HistoryEntry)."""

    @property
    def run(self) -> int: ...
    @property
    def started_at(self) -> datetime: ...
    @property
    def status(self) -> str: ...
    @property
    def trigger_block(self) -> str: ...
    @property
    def final_text(self) -> str: ...
    @property
    def actions_digest(self) -> str: ...


@dataclass(frozen=True)
class TrimmedHistory:
    messages: list[dict[str, Any]]
    included: int
    dropped: int
    tokens: int
    # Index in `entries` of the first run kept (len(entries) when none is).
    start: int = 0


def entry_texts(entry: HistoryLike) -> tuple[str, str]:
    """The (user, assistant) texts an earlier run contributes to the prompt."""
    user = f"[run #{entry.run} · {format_time(entry.started_at)}]\n{entry.trigger_block}"
    if entry.status == "failed":
        answer = "(this run failed before it could answer)"
    else:
        answer = entry.final_text.strip() or "(no final message)"
    if entry.actions_digest:
        answer += f"\n\nActions taken:\n{entry.actions_digest}"
    return user, answer


def _cut(text: str, max_tokens: int) -> str:
    keep = max(int(max_tokens * 3.5) - len(_CUT_MARK), 0)
    if len(text) <= keep:
        return text
    head = keep // 2
    return text[:head] + _CUT_MARK + text[len(text) - (keep - head) :]


def block_starts(costs: Sequence[int], budget_tokens: int) -> list[int]:
    """Indexes of the entries that open a block: the first entry, and each entry
    whose cumulative cost before it enters a new quarter of the budget."""
    quantum = max(1, budget_tokens // BLOCKS_PER_BUDGET)
    before = [0, *accumulate(costs)]
    return [
        i for i in range(len(costs)) if i == 0 or before[i] // quantum > before[i - 1] // quantum
    ]


def _window_start(costs: Sequence[int], budget_tokens: int) -> int:
    """The oldest block start whose entries to the end fit the budget; when no
    block start fits (the newest block alone is over budget), the oldest entry
    that does; len(costs) when not even the newest entry fits."""
    after = [*accumulate(reversed(costs))][::-1]  # after[i]: cost of entries[i:]
    for start in block_starts(costs, budget_tokens):
        if after[start] <= budget_tokens:
            return start
    return next((i for i, cost in enumerate(after) if cost <= budget_tokens), len(costs))


def window_start(entries: Sequence[HistoryLike], budget_tokens: int) -> int:
    """Index of the first of `entries` the window keeps (see `history_messages`);
    the runs before it are the ones that leave the prompt."""
    costs = [estimate_tokens(u) + estimate_tokens(a) for u, a in map(entry_texts, entries)]
    start = _window_start(costs, budget_tokens)
    return len(entries) - 1 if start == len(entries) and entries else start


def history_messages(entries: Sequence[HistoryLike], budget_tokens: int) -> TrimmedHistory:
    """Alternating user/assistant messages for earlier runs, within the budget.

    Keeps the runs from the window's start (a block start, see the module) to
    the newest. If even the newest run alone is over budget it is cut in the
    middle instead of dropped, so the model always sees what it last said.
    """
    pairs = [entry_texts(e) for e in entries]
    costs = [estimate_tokens(u) + estimate_tokens(a) for u, a in pairs]
    start = _window_start(costs, budget_tokens)
    kept = pairs[start:]
    total = sum(costs[start:])
    if not kept and pairs:
        half = budget_tokens // 2
        user, answer = pairs[-1]
        user, answer = _cut(user, half), _cut(answer, budget_tokens - half)
        kept, start = [(user, answer)], len(pairs) - 1
        total = estimate_tokens(user) + estimate_tokens(answer)
    messages: list[dict[str, Any]] = []
    for user, answer in kept:
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": answer})
    return TrimmedHistory(messages, len(kept), len(pairs) - len(kept), total, start)
