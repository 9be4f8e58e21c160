"""The monitor's eye on the provers: status reads, tracks, and hosts that failed.

At each poll the monitor reads the prover status of every running machine
(fleet_agent/fleet/prover_status.py), folds the reads into the tracks kept
in the store (fleet_agent/fleet/provers.py, fleet_agent/store/provers.py)
and records a machine that died, stayed stuck loading or stopped proving in
the failed-host memory (fleet_agent/store/hosts.py), once per failure, as it
does a machine whose prover claims a rate past belief (suspect: the capacity
model's estimate bounds what is believed, fleet_agent/fleet/provers.py). The
fleet views only read the tracks. With no status port configured
(``FLEET_PROVER_STATUS_PORT`` empty) nothing is read and capacity is the
capacity model's estimate.

In router mode (`ProverSpec.mode` "router", issue 52) no host is read: the
poll writes the router's members and reads its witness instead
(activities/fleet_router.py), turned into the same reads, so the same
rules judge them; a machine whose proofs Curio rejected is remembered
under ``rejected``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from fleet_agent.fleet.load_time import DEFAULT_IMAGE_GB, stuck_loading_minutes
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.prover_status import read_statuses
from fleet_agent.fleet.provers import ProverTrack, advance, not_proving_reason
from fleet_agent.fleet.snapshot import estimate
from fleet_agent.fleet.triage import GRACE_STATES, in_grace
from fleet_agent.fleet.witness_reads import unwatched
from fleet_agent.models import PollRequest
from fleet_agent.store import FailedHosts, ProofDays, ProverTracks, Store
from fleet_agent.untrusted import fence
from fleet_agent.vast.models import Instance

from .fleet_router import RouterLink, RouterLook, routed

__all__ = ["FORGET_EVERY_S", "ProverWatch", "failure_of"]

#: How often a worker drops failed-host entries whose time is up.
FORGET_EVERY_S = 3600.0


def failure_of(
    inst: Instance,
    track: ProverTrack | None,
    now: float,
    not_proving_minutes: float,
    image_gb: float = DEFAULT_IMAGE_GB,
    down: tuple[float | None, float] = (None, 0.0),
) -> tuple[str, str] | None:
    """(kind, reason) when this machine's failure says something about its host.
    `down`: since when it has been offline or unknown (reader's clock) and the
    grace in minutes; a host that comes back within it has not failed."""
    if inst.phase == "dead":
        if in_grace(inst.state, down[0], now, down[1]):
            return None
        # The reason names the host's status message to the model when its
        # offers are refused (failed_hosts.py): fenced.
        said = fence(inst.status_msg or "")
        return "dead", f"instance {inst.id} went {inst.state}: {said}"
    age_min = (now - inst.start_date) / 60 if inst.start_date else 0.0
    if (
        inst.is_booting
        and inst.state != "rebooting"
        and age_min > stuck_loading_minutes(inst.inet_down, image_gb)
    ):
        return "stuck", f"instance {inst.id} still {inst.state} after {age_min:.0f} min"
    if inst.phase == "running" and track is not None and track.rejected:
        return "rejected", f"instance {inst.id} is not believed: {track.suspect}"
    if inst.phase == "running" and track is not None and track.suspect:
        return "suspect", f"instance {inst.id} is suspect: {track.suspect}"
    if inst.phase == "running" and track is not None:
        reason = not_proving_reason(track, now, not_proving_minutes, estimate(inst))
        if reason is not None:
            return "not_proving", f"instance {inst.id} running but not proving: {reason}"
    return None


class ProverWatch:
    """Reads provers and keeps their tracks and the failed hosts in the store."""

    def __init__(self, store: Store, prover: ProverSpec, clock: Callable[[], float]) -> None:
        self._tracks = ProverTracks(store)
        self._proof_days = ProofDays(store)
        self._hosts = FailedHosts(store)
        self._port = prover.status_port
        self._allow_loopback = prover.allow_loopback
        #: Router mode: members out, witness in (activities/fleet_router.py).
        self.router = RouterLink(store, prover) if routed(prover) else None
        #: Whether provers are read at all (a status port, or the router's witness).
        self._reads = self._port is not None or self.router is not None
        self.image_gb = prover.image_gb
        self._clock = clock
        self._forgot_at: float | None = None

    async def tracks(self, agent_id: str) -> dict[int, ProverTrack] | None:
        """The tracks the last poll left (None: statuses are not read)."""
        if not self._reads:
            return None
        return await asyncio.to_thread(self._tracks.load, agent_id)

    async def down_since(self, agent_id: str) -> dict[int, float]:
        """Since when each machine has been offline or unknown, by id (reader's
        clock; the monitor keeps it whether or not statuses are read)."""
        tracks = await asyncio.to_thread(self._tracks.load, agent_id)
        return {iid: t.down_since for iid, t in tracks.items() if t.down_since is not None}

    async def observe(
        self, req: PollRequest, members: list[Instance]
    ) -> dict[int, ProverTrack] | None:
        """Read the running machines' provers, update and store the tracks,
        remember failed hosts; the tracks now (None: statuses are not read)."""
        old = await asyncio.to_thread(self._tracks.load, req.agent_id)
        running = [i for i in members if i.phase == "running"]
        look: RouterLook | None = None
        if self.router is not None:
            look = await self.router.look(req.agent_id, members, self._clock())
            reads = look.reads(running, old)
        elif self._port is not None:
            reads = await read_statuses(running, self._port, allow_loopback=self._allow_loopback)
        else:
            reads = {}
        now = self._clock()
        tracks: dict[int, ProverTrack] = {}
        for inst in members:
            track = old.get(inst.id)
            if inst.id in reads:
                track = advance(
                    track, reads[inst.id], inst.id, now, req.not_proving_minutes, estimate(inst)
                )
            elif track is None:
                # Not read (not running): a track only to remember its failures.
                track = ProverTrack(
                    instance_id=inst.id, first_seen_at=now, last_read_at=now, progress_at=now
                )
            if look is not None and look.stale and inst.phase == "running":
                # The router is not writing: unknown, not dead (fleet_router.py).
                track = unwatched(track, now, look.written_ago)
            if look is not None:
                track = look.settle(inst, track, now)
            down = (track.down_since or now) if inst.state in GRACE_STATES else None
            if down != track.down_since:
                track = track.model_copy(update={"down_since": down})
            tracks[inst.id] = await self._record_failure(req, inst, track, now)
        at = datetime.fromtimestamp(now, UTC)
        await asyncio.to_thread(self._tracks.replace, req.agent_id, tracks, at)
        # For the daily digest: what the counters rose by since the last poll
        # (a machine's first read counts from 0: it was rented by this agent).
        finished = sum(
            max(0, tracks[iid].proofs_completed - (old[iid].proofs_completed if iid in old else 0))
            for iid in reads
            if iid in tracks
        )
        await asyncio.to_thread(self._proof_days.add, req.agent_id, finished, at)
        if self._forgot_at is None or now - self._forgot_at >= FORGET_EVERY_S:
            # Expired entries exclude nothing already; dropping them keeps the
            # table as small as the failures that still count (any agent).
            self._forgot_at = now
            await asyncio.to_thread(self._hosts.forget_expired, at)
        return tracks if self._reads else None

    async def _record_failure(
        self, req: PollRequest, inst: Instance, track: ProverTrack, now: float
    ) -> ProverTrack:
        """Remember `inst`'s host if it failed (once per failure). While the
        router's witness is unknown its track stands still (`unwatched`), so
        nothing new is judged of its prover."""
        read_track = track if self._reads and track.phase else None
        failure = failure_of(
            inst,
            read_track,
            now,
            req.not_proving_minutes,
            self.image_gb,
            down=(track.down_since, req.offline_grace_minutes),
        )
        if failure is None or inst.machine_id is None or req.failed_host_ttl_hours <= 0:
            return track
        kind, reason = failure
        if track.failure_recorded == kind:
            return track
        at = datetime.fromtimestamp(now, UTC)
        await asyncio.to_thread(
            lambda: self._hosts.remember(
                req.agent_id,
                machine_id=int(inst.machine_id or 0),
                host_id=inst.host_id,
                reason=reason,
                at=at,
                until=at + timedelta(hours=req.failed_host_ttl_hours),
            )
        )
        return track.model_copy(update={"failure_recorded": kind})
