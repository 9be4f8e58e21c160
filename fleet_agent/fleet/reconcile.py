"""At most one machine per create label: find duplicates, keep the oldest, destroy the rest.

A create can be attempted more than once at the same time: Temporal starts
attempt 2 after a timeout while attempt 1 is still inside its rental call (or
its worker died after the request reached vast.ai). Each attempt labels its
machine with the same create label, so duplicates share a label. Every
attempt, and the monitor, settles a label the same way: the machine with the
lowest id (the first rented; vast.ai ids grow) is kept and every other one is
destroyed, then the label is listed again to confirm. Since all of them pick
the same survivor, attempts racing each other never destroy each other's keeper.

This module holds the pure part (models, which machine a label keeps); the
settling itself, on vast.ai, is `fleet_agent.fleet.settle`.
"""

from __future__ import annotations

from collections import defaultdict

from pydantic import Field

from fleet_agent.vast.models import Instance
from fleet_agent.wire import Wire

__all__ = [
    "LabelReconcile",
    "ReconcileReport",
    "ReconcileRequest",
    "duplicate_labels",
    "oldest",
]


class ReconcileRequest(Wire):
    """Settle every create label of this agent that has more than one machine."""

    agent_id: str


class LabelReconcile(Wire):
    """What happened to one label that had duplicates."""

    label: str
    kept: int | None
    destroyed: list[int] = Field(default_factory=list)
    # Duplicates still listed after the last check (a destroy that failed).
    remaining: list[int] = Field(default_factory=list)


class ReconcileReport(Wire):
    """One entry per create label that had duplicates (none: nothing to do)."""

    labels: list[LabelReconcile] = Field(default_factory=list)

    @property
    def destroyed(self) -> list[int]:
        return [i for r in self.labels for i in r.destroyed]

    @property
    def remaining(self) -> list[int]:
        return [i for r in self.labels for i in r.remaining]


def oldest(instances: list[Instance]) -> Instance | None:
    """The machine a label keeps: the lowest id, i.e. the first one rented.
    Only machines with a vast.ai id count (`Instance.has_id`): a row listed
    without one can be neither kept nor destroyed. None without any."""
    real = [i for i in instances if i.has_id]
    return min(real, key=lambda i: i.id) if real else None


def duplicate_labels(instances: list[Instance]) -> dict[str, list[int]]:
    """Labels carried by more than one machine → their ids, oldest first."""
    by_label: dict[str, list[int]] = defaultdict(list)
    for inst in instances:
        if inst.label and inst.has_id:
            by_label[inst.label].append(inst.id)
    return {label: sorted(ids) for label, ids in sorted(by_label.items()) if len(ids) > 1}
