"""Settle one create label on vast.ai: keep the oldest machine, destroy the rest, confirm.

See `fleet_agent.fleet.reconcile` for why and for the pure rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fleet_agent.fleet.reconcile import LabelReconcile, oldest
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastError
from fleet_agent.vast.models import Instance

__all__ = ["Settled", "settle_label"]

# Listings of a label: the first, one right after destroying the duplicates,
# and one more a little later if a destroy has not shown yet.
_CHECKS = 3
_RECHECK_DELAY_SECONDS = 1.0


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
    return Settled(label, oldest(found), gone, remaining)


def _extra(found: list[Instance]) -> list[int]:
    keep = oldest(found)
    if keep is None:
        return []
    return [i.id for i in found if i.has_id and i.id != keep.id]
