"""At most one machine per create label: find duplicates, keep the oldest, destroy the rest.

A create can be attempted more than once at the same time: Temporal starts
attempt 2 after a timeout while attempt 1 is still inside its rental call (or
its worker died after the request reached vast.ai). Each attempt labels its
machine with the same create label, so duplicates share a label. Every
attempt, and the monitor, settles a label the same way: the machine with the
lowest id (the first rented; vast.ai ids grow) is kept and every other one is
destroyed, then the label is listed again to confirm. Since all of them pick
the same survivor, attempts racing each other never destroy each other's keeper.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from fleet_agent.vast import VastClient, VastError
from fleet_agent.vast.models import Instance

__all__ = [
    "LabelReconcile",
    "ReconcileReport",
    "ReconcileRequest",
    "Settled",
    "duplicate_labels",
    "oldest",
    "settle_label",
]

# Listings of a label: the first, one right after destroying the duplicates,
# and one more a little later if a destroy has not shown yet.
_CHECKS = 3
_RECHECK_DELAY_SECONDS = 1.0


class ReconcileRequest(BaseModel):
    """Settle every create label of this agent that has more than one machine."""

    agent_id: str


class LabelReconcile(BaseModel):
    """What happened to one label that had duplicates."""

    label: str
    kept: int | None
    destroyed: list[int] = Field(default_factory=list)
    # Duplicates still listed after the last check (a destroy that failed).
    remaining: list[int] = Field(default_factory=list)


class ReconcileReport(BaseModel):
    """One entry per create label that had duplicates (none: nothing to do)."""

    labels: list[LabelReconcile] = Field(default_factory=list)

    @property
    def destroyed(self) -> list[int]:
        return [i for r in self.labels for i in r.destroyed]

    @property
    def remaining(self) -> list[int]:
        return [i for r in self.labels for i in r.remaining]


def oldest(instances: list[Instance]) -> Instance:
    """The machine a label keeps: the lowest id, i.e. the first one rented."""
    return min(instances, key=lambda i: i.id)


def duplicate_labels(instances: list[Instance]) -> dict[str, list[int]]:
    """Labels carried by more than one machine → their ids, oldest first."""
    by_label: dict[str, list[int]] = defaultdict(list)
    for inst in instances:
        if inst.label:
            by_label[inst.label].append(inst.id)
    return {label: sorted(ids) for label, ids in sorted(by_label.items()) if len(ids) > 1}


@dataclass
class Settled:
    """A label after `settle_label`: the machine kept, and what was destroyed."""

    label: str
    kept: Instance | None
    destroyed: list[int] = field(default_factory=list)
    remaining: list[int] = field(default_factory=list)

    def report(self) -> LabelReconcile:
        return LabelReconcile(
            label=self.label,
            kept=None if self.kept is None else self.kept.id,
            destroyed=list(self.destroyed),
            remaining=list(self.remaining),
        )


async def settle_label(
    vast: VastClient,
    label: str,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> Settled:
    """Keep the oldest machine carrying `label`, destroy the others, confirm.

    A failed destroy is not raised: the next listing shows whether the machine
    is still there, and `remaining` reports what outlived every check. A
    failed listing raises `VastError` (nothing can be confirmed without it).
    """
    destroyed: list[int] = []
    found = await vast.list_instances(label=label)
    for check in range(1, _CHECKS):
        extra = _extra(found)
        if not extra:
            break
        for iid in extra:
            try:
                await vast.destroy_instance(iid)
            except VastError:
                continue  # the next listing tells whether it is gone
            if iid not in destroyed:
                destroyed.append(iid)
        if check > 1:
            await sleep(_RECHECK_DELAY_SECONDS)
        found = await vast.list_instances(label=label)
    remaining = _extra(found)
    gone = [i for i in destroyed if i not in remaining]
    return Settled(label, oldest(found) if found else None, gone, remaining)


def _extra(found: list[Instance]) -> list[int]:
    if not found:
        return []
    keep = oldest(found)
    return [i.id for i in found if i.id != keep.id]
