"""Temporary machines: bridges rented to prove while slower rentals load.

A create may say `temporary: true`. The agent's own record of that is the
tool-call journal (fa_tool_calls): the call's input, keyed by the run and
tool_use_id its machine's label is derived from (labels.py), so no label
format changes and a machine rented by an older worker is simply not
temporary. The snapshot marks such a machine `temporary`; the policy does not
count it as cover for the target (a failure among the other machines is
replaced as if it were not there) and releases it as soon as the others
prove the target without it; the destroy guardrail lets it go from
TEMPORARY_MIN_AGE_MINUTES instead of `min_release_age_minutes`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleet_agent.fleet.labels import create_label

__all__ = ["TEMPORARY_MIN_AGE_MINUTES", "temporary_labels", "temporary_min_age"]

#: A temporary machine is kept at least this long: past the 20 minutes inside
#: which a release of a healthy machine counts as thrash, so a bridge whose
#: cover proved early is not rented and released within the same few polls.
TEMPORARY_MIN_AGE_MINUTES = 21.0


def temporary_min_age(min_release_age_minutes: float) -> float:
    """The age from which a healthy temporary machine may be released: never
    later than an ordinary machine."""
    return min(TEMPORARY_MIN_AGE_MINUTES, min_release_age_minutes)


def temporary_labels(agent_id: str, calls: Iterable[tuple[int, str, dict[str, Any]]]) -> set[str]:
    """The labels of the machines `agent_id`'s create calls rented as
    temporary. `calls`: (run, tool_use_id, input) of its create_instance calls."""
    return {
        create_label(agent_id, run, tool_use_id)
        for run, tool_use_id, args in calls
        if args.get("temporary") is True
    }
