"""The kill switch's side at vast.ai: this agent's machines, destroyed and checked gone.

`stop_fleet` lists every machine carrying the agent's label (labels parsed
exactly), and with `destroy_all` destroys each one and lists again until
none is left, destroying again what is still there; each destroyed machine
is closed in the spend ledger (`closed`) at the time of its destroy. What it
found first rides in the heartbeat details, so a retried attempt still
reports the fleet and the $/h that the freeze stopped, not only what was left.
A machine whose row lists no usable id cannot be destroyed through the API:
it is left to the operator (an `operator alert` in the log), never waited for.

A create that was journalled before the freeze may still be renting: with
`destroy_all`, the stop also waits until no create of the agent is in
flight (`flying`), destroying what they produce; the create itself reads
the config once more before its rental and after it (activities/fleet.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from fleet_agent.models import StopFleetReport, StopFleetRequest
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastError
from fleet_agent.vast.models import Instance

from .fleet_results import vast_failure
from .heartbeat import heartbeating

__all__ = ["CHECK_EVERY_S", "CREATE_MAY_RUN_S", "GIVE_UP_AFTER_S", "FleetStopper"]

_log = logging.getLogger(__name__)

#: Between two checks that the machines are gone, and how long one attempt
#: keeps checking before it fails (Temporal retries it, without limit).
CHECK_EVERY_S = 5.0
GIVE_UP_AFTER_S = 180.0
#: How long after its start a create may still be renting: its activity's
#: start-to-close timeout (5 min, workflows/policies.py) and a minute more.
#: Older journal rows without a result are attempts that died.
CREATE_MAY_RUN_S = 360.0


class FleetStopper:
    """Destroys an agent's whole fleet on vast.ai and checks it is gone."""

    def __init__(
        self,
        vast: VastClient,
        ours: Callable[[str], Awaitable[list[Instance]]],
        closed: Callable[[str, int, Instance], Awaitable[None]],
        flying: Callable[[str], Awaitable[int]],
    ) -> None:
        self._vast = vast
        self._ours = ours
        self._closed = closed
        self._flying = flying

    async def _members(self, agent_id: str) -> list[Instance]:
        try:
            return [i for i in await self._ours(agent_id) if not i.is_gone]
        except VastError as exc:
            raise vast_failure(exc) from None

    async def _destroyable(self, agent_id: str) -> list[Instance]:
        """The members the API can destroy: a row without a usable id
        (`Instance.unreadable_row`) cannot be, and waiting for it to go
        would hold the stop for ever."""
        return [i for i in await self._members(agent_id) if i.has_id]

    async def stop(self, req: StopFleetRequest) -> StopFleetReport:
        first = _earlier_report()
        report = first
        async with heartbeating(
            details=lambda: (report.model_dump(mode="json"),) if report is not None else ()
        ):
            members = await self._members(req.agent_id)
            if first is None:
                report = StopFleetReport(
                    instances=[i.id for i in members],
                    fleet_dph=round(sum(i.dph_total or 0.0 for i in members), 4),
                )
            assert report is not None
            if not req.destroy_all:
                return report
            for inst in members:
                if not inst.has_id:
                    _log.error(
                        "operator alert: %s: a machine labelled %s has a vast.ai row without "
                        "a usable id; destroy it in vast.ai's console",
                        req.agent_id,
                        inst.label,
                    )
            members = [i for i in members if i.has_id]
            deadline = time.monotonic() + GIVE_UP_AFTER_S
            destroyed = [i for i in report.instances if i > 0]  # ids of machines, not derived
            flying = await self._flying(req.agent_id)
            while members or flying:
                for inst in members:
                    try:
                        # A machine already gone counts as destroyed (missing_ok).
                        await self._vast.destroy_instance(inst.id)
                    except VastError as exc:
                        raise vast_failure(exc) from None
                    await self._closed(req.agent_id, inst.id, inst)
                    if inst.id not in destroyed:
                        destroyed.append(inst.id)
                await asyncio.sleep(CHECK_EVERY_S)
                # Creates first: one that finishes between the two reads has
                # its machine in the listing that follows.
                flying = await self._flying(req.agent_id)
                members = await self._destroyable(req.agent_id)
                if members and time.monotonic() > deadline:
                    raise ApplicationError(
                        f"{len(members)} machine(s) still listed after being destroyed: "
                        f"{[i.id for i in members]}; trying again",
                        type="FleetNotGone",
                    )
            return report.model_copy(
                update={"destroyed": destroyed, "dph_stopped": report.fleet_dph}
            )


def _earlier_report() -> StopFleetReport | None:
    """What an earlier attempt of this activity found first, if any."""
    if not activity.in_activity():
        return None
    details: Any = activity.info().heartbeat_details
    if not details:
        return None
    try:
        return StopFleetReport.model_validate(details[0])
    except (ValueError, TypeError):
        return None
