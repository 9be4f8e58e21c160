"""How the fleet tools and the run's context see this agent's fleet.

This agent's machines from vast.ai (labels parsed exactly), judged by the
agent's rules: the prover tracks the monitor's last poll left in the store
(activities/fleet_provers.py), not proving after `not_proving_minutes`, and
the hysteresis of `min_release_age_minutes`. Every summary made from a
fresh listing accrues the fleet it listed in the spend ledger
(activities/fleet_spend.py).

A run's context and the model's `get_fleet_status` take the worker's newest
listing at once, up to FLEET_VAST_LIST_STALE_S old, rather than wait behind
the list endpoint's pacing for a walk of the whole account (4.4 s at 100
agents), unless the store's tool-call journal says this agent's fleet
changed after that listing began (a write by any worker counts).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from temporalio.exceptions import ApplicationError

from fleet_agent.fleet.drain import drain_done
from fleet_agent.fleet.labels import is_ours, label_prefix, parse_label
from fleet_agent.fleet.provers import ProverTrack
from fleet_agent.fleet.snapshot import FleetInstance, FleetSnapshot, summarize
from fleet_agent.fleet.temporary import temporary_labels, temporary_min_age
from fleet_agent.models import AgentConfig, PollRequest
from fleet_agent.store import ToolJournal
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastError
from fleet_agent.vast.models import Instance

from .fleet_provers import ProverWatch
from .fleet_results import vast_failure
from .fleet_spend import SpendBook

__all__ = ["FLEET_WRITES", "FleetViews", "rules_of"]

log = logging.getLogger(__name__)

#: The tools whose calls change an agent's fleet: a view that may be a little
#: old is never older than the last of them.
FLEET_WRITES = ("create_instance", "destroy_instance")


class FleetViews:
    """Reads the fleet (vast.ai) and the prover tracks and journal (the store)."""

    def __init__(
        self,
        vast: VastClient,
        watch: ProverWatch,
        spend: SpendBook,
        clock: Callable[[], float],
        journal: ToolJournal,
    ) -> None:
        self._vast = vast
        self._watch = watch
        self._spend = spend
        self._clock = clock
        self._journal = journal

    async def ours(self, agent_id: str, *, fresh: bool = False) -> list[Instance]:
        """This agent's machines: labels parsed exactly (agent `a` never owns
        `a/b`'s), destroyed rows left out. From the worker's shared listing
        (a few seconds old at most, begun after this worker's last write), or
        `fresh`: a walk of its own, for a decision that must also see another
        worker's writes (a rental's guardrails)."""
        listed = await self._vast.list_instances(
            label_prefix=label_prefix(agent_id), shared=not fresh
        )
        return [i for i in listed if is_ours(i.label, agent_id)]

    async def _temporary(self, agent_id: str, members: list[Instance]) -> set[str]:
        """The labels among `members` whose create call asked for a temporary
        machine, from the journal (fleet_agent/fleet/temporary.py)."""
        runs = {p.run for p in (parse_label(i.label) for i in members) if p is not None}
        if not runs:
            return set()
        calls = await asyncio.to_thread(self._journal.temporary_creates, agent_id, runs)
        return temporary_labels(agent_id, calls)

    async def _recent(self, agent_id: str) -> tuple[list[Instance], bool]:
        """This agent's machines for a view that may be a little old, and
        whether the listing was served stale: never one begun before the
        journal's last fleet change of this agent (not read when the worker
        serves nothing stale)."""
        listing = self._vast.listing
        if not listing.serves_stale:
            return [i for i in await self.ours(agent_id) if not i.is_gone], False
        now = self._clock()
        last = await asyncio.to_thread(
            self._journal.last_change, agent_id, FLEET_WRITES, datetime.fromtimestamp(now, UTC)
        )
        # Its age as the listing is asked, not as of before the read: a slow
        # read would date the change later than it was, and hide from this
        # agent the walks that began after it (each view would walk again).
        changed_ago_s = None if last is None else self._clock() - last.timestamp()
        rows, stale = await listing.view(stale_ok=True, changed_ago_s=changed_ago_s)
        return [i for i in rows if not i.is_gone and is_ours(i.label, agent_id)], stale

    async def summary(
        self, req: PollRequest, *, observe: bool = False, recent: bool = False
    ) -> FleetSnapshot:
        """The fleet against `req`'s rules: the provers read now (`observe`, the
        monitor's poll) or as the last poll left them (every other view).
        `recent`: from a listing up to the worker's staleness limit old when
        one is at hand (`_recent`). The listed fleet is accrued in the spend
        ledger unless it was served stale (the monitor's next poll, fresh,
        accrues it up to its own time)."""
        try:
            if recent and not observe:
                members, stale = await self._recent(req.agent_id)
            else:
                members, stale = [i for i in await self.ours(req.agent_id) if not i.is_gone], False
        except VastError as exc:
            raise vast_failure(exc) from None
        if not stale:
            await self._spend.accrue(req.agent_id, members)
        if observe:
            _log_unreadable(req.agent_id, members)
            tracks = await self._watch.observe(req, members)
            if tracks is not None:
                members = await self._finish_drains(req.agent_id, members, tracks)
        else:
            tracks = await self._watch.tracks(req.agent_id)
        return summarize(
            members,
            temporary=await self._temporary(req.agent_id, members),
            target=req.target_proofs_per_hour,
            now_epoch=self._clock(),
            tracks=tracks,
            not_proving_minutes=req.not_proving_minutes,
            offline_grace_minutes=req.offline_grace_minutes,
            down_since=await self._watch.down_since(req.agent_id),
            min_release_age_minutes=req.min_release_age_minutes,
            image_gb=self._watch.image_gb,
            spare=req.spare_one_machine,
        )

    async def _finish_drains(
        self, agent_id: str, members: list[Instance], tracks: dict[int, ProverTrack]
    ) -> list[Instance]:
        """Destroy each draining machine whose work is done, or whose drain
        took too long (fleet_agent/fleet/drain.py); the members left. A
        destroy that fails is tried again at the next poll."""
        now, left = self._clock(), []
        for inst in members:
            track = tracks.get(inst.id)
            why = drain_done(track, now) if track is not None else None
            if why is None:
                left.append(inst)
                continue
            try:
                await self._vast.destroy_instance(inst.id)
            except VastError as exc:
                log.warning("drained instance %s not destroyed yet: %s", inst.id, exc)
                left.append(inst)
                continue
            log.info("instance %s destroyed after its drain: %s", inst.id, why)
            await self._spend.close(agent_id, inst.id, inst)
            await self.forget_member(agent_id, inst.id)
        return left

    @property
    def routed(self) -> bool:
        """Whether machines prove behind the router (router mode, issue 52)."""
        return self._watch.router is not None

    async def drain_via_router(self, agent_id: str, inst: Instance) -> str | None:
        """Mark `inst` draining at the router (activities/fleet_router.py):
        None once marked, else why not."""
        if self._watch.router is None:
            return "not in router mode"
        return await self._watch.router.drain(agent_id, inst, self._clock())

    async def forget_member(self, agent_id: str, instance_id: int) -> None:
        """A destroyed machine is no router member from now (router mode)."""
        if self._watch.router is not None:
            await self._watch.router.forget(agent_id, instance_id)

    async def track(self, agent_id: str, instance_id: int) -> ProverTrack | None:
        """The prover track the monitor's last poll left for one machine
        (None: none, or statuses are not read)."""
        tracks = await self._watch.tracks(agent_id)
        return None if tracks is None else tracks.get(instance_id)

    async def snapshot(
        self, agent_id: str, target: float, config: AgentConfig | None = None
    ) -> FleetSnapshot:
        """The fleet, or a snapshot that says why it could not be read (for a
        run's context: a recent listing serves)."""
        try:
            return await self.summary(
                rules_of(agent_id, config or AgentConfig(), target), recent=True
            )
        except ApplicationError as exc:
            return FleetSnapshot(target_proofs_per_hour=target, error=exc.message)

    async def row(self, agent_id: str, inst: Instance, config: AgentConfig) -> FleetInstance:
        """One machine as the snapshot shows it, judged by the agent's rules."""
        tracks = await self._watch.tracks(agent_id)
        rules = rules_of(agent_id, config)
        return summarize(
            [inst],
            temporary=await self._temporary(agent_id, [inst]),
            target=config.target_proofs_per_hour,
            now_epoch=self._clock(),
            tracks=tracks,
            not_proving_minutes=rules.not_proving_minutes,
            offline_grace_minutes=rules.offline_grace_minutes,
            down_since=await self._watch.down_since(agent_id),
            min_release_age_minutes=rules.min_release_age_minutes,
            image_gb=self._watch.image_gb,
        ).instances[0]

    @staticmethod
    def too_young(inst: Instance, row: FleetInstance, config: AgentConfig) -> str | None:
        """Hysteresis: why a healthy machine may not be released yet, or None.
        A dead, idle, stuck or not-proving machine may always go."""
        if row.releasable:
            return None
        kept = (
            f"temporary machines are kept at least "
            f"{temporary_min_age(config.min_release_age_minutes):g} min, others "
            if row.temporary
            else "machines are kept at least "
        )
        return (
            f"Refused: instance {inst.id} is healthy and only {row.age_minutes:.0f} min old; "
            f"{kept}{config.min_release_age_minutes:g} min "
            "(min_release_age_minutes) so that a target change or a passing surplus "
            "does not rent and release the same capacity. Nothing was destroyed."
        )


def _log_unreadable(agent_id: str, members: list[Instance]) -> None:
    """Each machine of the agent whose row does not parse, once a poll: it
    bills, and every cap counts it at the cap's value (guardrails.py)."""
    for inst in members:
        if inst.unreadable is not None:
            log.warning(
                "agent %s: instance %s (label %s): its vast.ai row does not parse (%s); "
                "still billed, counted at the caps' limits until it parses or is destroyed",
                agent_id,
                inst.id,
                inst.label,
                inst.unreadable,
            )


def rules_of(agent_id: str, config: AgentConfig, target: float | None = None) -> PollRequest:
    """The rules a view of `agent_id`'s fleet is judged by, from its config."""
    return PollRequest(
        agent_id=agent_id,
        target_proofs_per_hour=config.target_proofs_per_hour if target is None else target,
        not_proving_minutes=config.not_proving_minutes,
        offline_grace_minutes=config.offline_grace_minutes,
        min_release_age_minutes=config.min_release_age_minutes,
        failed_host_ttl_hours=config.failed_host_ttl_hours,
        spare_one_machine=config.spare_one_machine,
    )
