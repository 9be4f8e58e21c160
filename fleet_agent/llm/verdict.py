"""Parse the verdict tag that ends the final text of every run.

The contract: the final assistant text ends with
``<verdict>{"action": bool, "state_changed": bool}</verdict>``. A missing or
malformed verdict is not fatal: the caller treats the run as action=true (so it
stays in the prompt) and flags it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from fleet_agent.models import RunResult, RunStatus, Trigger, TriggerKind, Verdict

__all__ = [
    "ANSWER_PREVIEW_CHARS",
    "VERDICT_INSTRUCTIONS",
    "acted",
    "answer_preview",
    "judge",
    "parse_verdict",
    "strip_verdict",
]

# The most of a run's final answer that enters workflow history (its call_llm
# result, the run's result, the agent's last_run): docs/DECISIONS.md,
# "Observability".
ANSWER_PREVIEW_CHARS = 200

_TAG = re.compile(r"<verdict>(?P<body>.*?)</verdict>", re.DOTALL | re.IGNORECASE)
_OPEN, _CLOSE = "<verdict>", "</verdict>"

VERDICT_INSTRUCTIONS = (
    "End your final message of every run with exactly one verdict tag on its own line:\n"
    '<verdict>{"action": true|false, "state_changed": true|false}</verdict>\n'
    "action: you did something (rented, destroyed, scheduled, answered a human).\n"
    "state_changed: the fleet or your plan changed since the previous run."
)


def parse_verdict(text: str) -> tuple[Verdict | None, str]:
    """Return (verdict, error); exactly one of them is meaningful.

    Only the last tag counts, and it must be the last thing in the text (trailing
    whitespace aside): a tag quoted mid-message is not a verdict, and neither
    hides the real one.
    """
    lowered = text.lower()
    start = lowered.rfind(_OPEN)
    if start < 0:
        return None, "no <verdict> tag in the final message"
    end = lowered.find(_CLOSE, start)
    if end < 0:
        return None, "the <verdict> tag is not closed"
    if text[end + len(_CLOSE) :].strip():
        return None, "the <verdict> tag is not at the end of the final message"
    try:
        data = json.loads(text[start + len(_OPEN) : end])
    except json.JSONDecodeError as exc:
        return None, f"verdict is not JSON: {exc.msg}"
    except RecursionError:  # "[[[[…": the model's text, and so anyone's who wrote in it
        return None, "verdict is not JSON: nested too deep"
    if not isinstance(data, dict):
        return None, "verdict must be a JSON object"
    missing = [k for k in ("action", "state_changed") if k not in data]
    if missing:
        return None, f"verdict lacks {', '.join(missing)}"
    if not all(isinstance(data[k], bool) for k in ("action", "state_changed")):
        return None, "verdict fields must be booleans"
    return Verdict(action=data["action"], state_changed=data["state_changed"]), ""


def strip_verdict(text: str) -> str:
    """The text without its verdict tags, for showing to people."""
    return _TAG.sub("", text).rstrip()


def judge(result: RunResult, triggers: Sequence[Trigger]) -> None:
    """Apply the verdict rules to a finished run: what counts as a no-op, what
    stays in the prompt.

    A missing or malformed verdict is shown as such ("no verdict"), never
    invented; the run then counts as having acted, so it stays in the prompt.
    A run that changed the fleet acted, whatever its verdict says; a run that
    answered an operator stays in the prompt.
    """
    verdict = result.verdict if result.status == RunStatus.OK else None
    if result.status == RunStatus.OK and verdict is None and not result.verdict_error:
        result.verdict_error = "no verdict"
    if verdict is not None and result.mutating_calls:
        verdict = Verdict(action=True, state_changed=verdict.state_changed)
    result.verdict = verdict
    result.noop = (
        verdict is not None
        and not result.verdict_error
        and not verdict.action
        and not verdict.state_changed
        and result.mutating_calls == 0
        # Recording a known demand event changed the config: the run is
        # remembered (in fixed mode no other part of the prompt shows it).
        and not result.demand_events
    )
    human = any(t.kind == TriggerKind.HUMAN_MESSAGE for t in triggers)
    result.in_prompt = not result.noop or human


def acted(result: RunResult) -> bool:
    """The run acted: its verdict says so, or it made a mutating tool call
    (which counts as an action whatever the verdict says)."""
    return result.mutating_calls > 0 or (result.verdict is not None and result.verdict.action)


def answer_preview(text: str, limit: int = ANSWER_PREVIEW_CHARS) -> str:
    """The start of a final answer for the Web UI: verdict tags removed,
    whitespace collapsed to single spaces, at most `limit` characters (an
    ellipsis marks a cut)."""
    flat = " ".join(strip_verdict(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
