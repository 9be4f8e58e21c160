"""The rolling session summary: what runs that left the history window become.

The history window (fleet_agent/llm/history.py) drops whole blocks of runs. Here
those runs are *folded* into a summary instead of being lost: the summary of
the session so far, plus the dropped runs, become the next summary. It fills
the request's summary slot (breakpoint B of fleet_agent/llm/prompt_cache.py), so
it changes only when a block leaves the window, and the prefix stays
byte-identical between two moves.

Pure rules only, shared by the activities that write and read the prompt:

- `history_share`: the summary has a hard cap (`summary_cap`, a fixed share
  of `history_token_budget`); the window gets the rest, whether a summary
  exists yet or not, so a new summary can never push the window over budget;
- `fold_point`: how many of the runs after the summary leave the window;
- `digest`: the deterministic summary, written when no model can (autopilot)
  or the model's summary failed, timed out or came back over the cap. It keeps
  each operator message's gist (author, time) and each mutating action (tool,
  arguments, outcome), and fits the cap by shortening gists, then dropping the
  oldest other lines, and only then the oldest messages;
- `summary_block`: the summary as the model reads it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from fleet_agent.llm.history import HistoryLike, window_start
from fleet_agent.llm.prompt import estimate_tokens, format_time

__all__ = [
    "SUMMARY_SHARE",
    "FoldedAction",
    "FoldedMessage",
    "FoldedRun",
    "digest",
    "fit_lines",
    "fold_point",
    "history_share",
    "summary_block",
    "summary_body_cap",
    "summary_cap",
]

SUMMARY_SHARE = 8
"""The summary's cap is 1/8 of `history_token_budget` (3,000 tokens of the
default 24,000); the window of earlier runs gets the other 7/8."""

# "## Session summary (runs #123456–#123456, …)" and its newline, with room.
_HEADING_TOKENS = 30
_GIST_CHARS = (240, 120, 60)
_SAID = " said: "
_OMITTED = "- (… {n} earlier lines omitted to fit the summary's cap)"


def summary_cap(history_token_budget: int) -> int:
    """The most tokens a session summary may have (its block's framing included)."""
    return history_token_budget // SUMMARY_SHARE


def summary_body_cap(history_token_budget: int) -> int:
    """The cap of the summary's body: `summary_cap` less its block's heading."""
    return max(summary_cap(history_token_budget) - _HEADING_TOKENS, 0)


def history_share(history_token_budget: int) -> int:
    """The tokens left for the window of earlier runs next to a summary."""
    return history_token_budget - summary_cap(history_token_budget)


def fold_point(entries: Sequence[HistoryLike], history_token_budget: int) -> int:
    """How many of `entries` (the runs after the summary, oldest first) leave the
    window and are to be folded; 0 when they all fit."""
    return window_start(entries, history_share(history_token_budget))


@dataclass(frozen=True)
class FoldedMessage:
    author: str
    at: datetime
    text: str


@dataclass(frozen=True)
class FoldedAction:
    tool: str
    args: dict[str, Any]
    outcome: str


@dataclass(frozen=True)
class FoldedRun:
    """What the summary needs of one run that leaves the window."""

    run: int
    started_at: datetime
    failed: bool = False
    messages: list[FoldedMessage] = field(default_factory=list)
    actions: list[FoldedAction] = field(default_factory=list)


def _gist(text: str, chars: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 1] + "…"


def _args(args: dict[str, Any]) -> str:
    return json.dumps(args, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _run_lines(run: FoldedRun, gist_chars: int) -> list[str]:
    lines = [
        f"- run #{run.run} {format_time(m.at)}: {m.author}{_SAID}{_gist(m.text, gist_chars)}"
        for m in run.messages
    ]
    lines += [
        f"- run #{run.run}: {a.tool}({_gist(_args(a.args), gist_chars)}) → "
        f"{_gist(a.outcome, gist_chars)}"
        for a in run.actions
    ]
    if run.failed and run.messages:
        lines.append(f"- run #{run.run} failed before it could answer")
    return lines


def fit_lines(lines: Sequence[str], cap_tokens: int) -> list[str]:
    """`lines` within `cap_tokens` (joined by newlines), dropping the oldest
    first and saying how many went."""
    kept = list(lines)
    while kept and estimate_tokens("\n".join(kept)) > cap_tokens:
        dropped = len(lines) - len(kept) + 1
        kept = kept[1:]
        note = _OMITTED.format(n=dropped)
        if kept and estimate_tokens("\n".join([note, *kept])) <= cap_tokens:
            return [note, *kept]
    return kept


def digest(previous: str, runs: Sequence[FoldedRun], cap_tokens: int) -> str:
    """The deterministic summary: `previous` (the summary's body so far, or
    "") followed by a line per operator message and per mutating action of
    `runs`, within `cap_tokens`. Gists shorten before any line is dropped; then
    the oldest lines that are not an operator's message go, and only then the
    oldest messages."""
    old = [line for line in previous.splitlines() if line.strip()]
    if not runs and not old:
        return ""
    span = f"runs #{runs[0].run}–#{runs[-1].run}" if runs else ""
    header = [f"- {span}: no operator message and no change to the fleet"] if span else []
    for chars in _GIST_CHARS:
        new = [line for run in runs for line in _run_lines(run, chars)] or header
        lines = old + new
        if estimate_tokens("\n".join(lines)) <= cap_tokens:
            return "\n".join(lines)
    # Still over: the oldest lines that are not an operator's words go first.
    while estimate_tokens("\n".join(lines)) > cap_tokens:
        other = next((i for i, line in enumerate(lines) if _SAID not in line), None)
        if other is None:
            break
        del lines[other]
    return "\n".join(fit_lines(lines, cap_tokens))


def summary_block(body: str, first_run: int, upto_run: int) -> str:
    """The summary as the model reads it, in the request's summary slot."""
    return f"## Session summary (runs #{first_run}–#{upto_run}, no longer shown in full)\n{body}"
