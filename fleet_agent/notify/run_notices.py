"""What in a run's tool results and errors notifies: a create refused by the
budget or a rate, a vast.ai or Anthropic key rejected.

Read from the texts our own code writes (activities/fleet.py's refusals,
activities/fleet_results.py's `vast_failure`, fleet_agent/llm/anthropic_errors.py):
a change of wording there is caught by tests/notify/test_notify_rules.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from fleet_agent.models.activity_payloads import ToolResult
from fleet_agent.models.notify import RunNotice

__all__ = ["MAX_NOTICES", "auth_failure", "refusal_kind", "run_notices"]

MAX_NOTICES = 5

_ANTHROPIC_AUTH = re.compile(
    r"Anthropic API returned HTTP (401|403)|authentication_error|permission_error|"
    r"no Anthropic credentials"
)
_VAST_AUTH = re.compile(r"vast\.ai rejected the worker's API key")


def refusal_kind(content: str) -> str | None:
    """ "budget" or "rate" when a create's result is one of those refusals."""
    if content.startswith("Refused by the daily budget"):
        return "budget"
    if content.startswith("Refused:") and "max_creates_per_hour" in content:
        return "rate"
    if content.startswith("Refused: ") and "rented in the last hour" in content:
        return "rate"
    return None


def auth_failure(text: str) -> str | None:
    """ "anthropic" or "vast.ai" when `text` says that service refused our key."""
    if _ANTHROPIC_AUTH.search(text):
        return "anthropic"
    if _VAST_AUTH.search(text):
        return "vast.ai"
    return None


def run_notices(outcomes: Iterable[ToolResult]) -> list[RunNotice]:
    """The notices in one round's tool results (at most `MAX_NOTICES`)."""
    found: list[RunNotice] = []
    for outcome in outcomes:
        if not outcome.is_error:
            continue
        if outcome.name == "create_instance" and (kind := refusal_kind(outcome.content)):
            found.append(RunNotice(kind="create_refused", subject=kind, text=outcome.content))
        elif provider := auth_failure(outcome.content):
            found.append(RunNotice(kind="auth_failing", subject=provider, text=outcome.content))
    return found[:MAX_NOTICES]
