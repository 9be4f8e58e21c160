"""The agent's side of the cuzk router (issue 52, router mode): members out, witness in.

At each monitor poll (activities/fleet_provers.py, `ProverWatch.observe`):

* **Members.** Every running machine whose front port (the container's
  ``FLEET_FRONT_PORT``) is mapped becomes a member, ``serve``, at
  ``public_ipaddr:<host port>`` (the address checked as a status read's is:
  global, or loopback where allowed; fleet_agent/fleet/prover_status.py).
  The rest are no members. Each member carries what we rent, not what its
  host says: its GPUs (the vast.ai row's ``num_gpus``: the router never
  counts more, whatever the host's GetStatus claims) and the capacity
  model's proofs per hour for it (`estimate`: the router's expected time
  per job there, and so its attempt timeout). A machine the destroy tool
  drains is marked ``drain`` with its ``drain_by`` (`RouterLink.drain`), and stays so
  (fleet_agent/store/router.py keeps a drain over the monitor's ``serve``).
* **Witness.** What the router wrote of each machine becomes the monitor's
  read (fleet_agent/fleet/witness_reads.py); a member the router has not
  witnessed yet is starting (its not-proving time runs), and a machine that
  could not be a member is unreachable, as a status that could not be read
  was. When
  the router has not written for `WITNESS_STALE_S` the witness is unknown:
  no read at all, the tracks keep what they knew, and no failure is
  recorded: nothing is replaced because the router is down.

Nothing here talks to a host: the router does, and it is the witness.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from fleet_agent.cuzk.witness import MachineWitness, MemberSpec, RouterQueue
from fleet_agent.fleet.drain import DRAIN_LIMIT_S
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.prover_status import status_url
from fleet_agent.fleet.provers import ProverRead, ProverTrack
from fleet_agent.fleet.snapshot import estimate
from fleet_agent.fleet.witness_reads import (
    WITNESS_STALE_S,
    joining_grace_s,
    rejected_reason,
    witness_read,
)
from fleet_agent.store import RouterMembers, RouterWitness, Store
from fleet_agent.store.router import WitnessRead
from fleet_agent.vast.models import Instance

__all__ = ["RouterLink", "RouterLook", "front_port_of", "rented_capacity", "routed"]

#: `MemberSpec`'s bounds (fleet_agent/cuzk/witness.py): a value past them is
#: left out (the router then uses its own count and defaults).
_MAX_GPUS = 64
_MAX_RATE = 100_000.0


def routed(prover: ProverSpec) -> bool:
    """Whether machines prove behind the router (`ProverSpec.mode` "router")."""
    return prover.mode == "router"


def front_port_of(prover: ProverSpec) -> int:
    """The container port of the machine's front (`ProverSpec.front_port`)."""
    return prover.front_port


def rented_capacity(inst: Instance) -> tuple[int | None, float | None]:
    """(GPUs rented, proofs per hour the capacity model expects) of `inst`,
    each None when unknown or out of `MemberSpec`'s bounds."""
    gpus = inst.num_gpus if inst.num_gpus is not None and 1 <= inst.num_gpus <= _MAX_GPUS else None
    if gpus is None or not inst.gpu_name:
        return gpus, None  # no estimate without the GPU it is made of
    rate = estimate(inst)
    return gpus, rate if math.isfinite(rate) and 0 < rate <= _MAX_RATE else None


@dataclass(frozen=True)
class RouterLook:
    """What one poll learnt of the router: its witness, its queue, when it
    last wrote, and the drains the agent asked for."""

    witnesses: dict[int, MachineWitness]
    queue: RouterQueue | None
    #: When the router last wrote (epoch seconds, its clock; None: never).
    written_at: float | None
    now: float
    #: Each draining member's drain_by (epoch seconds).
    drains: dict[int, float] = field(default_factory=dict)
    #: Why a running machine is no member (its front is not mapped, ...).
    refused: dict[int, str] = field(default_factory=dict)

    @property
    def written_ago(self) -> float | None:
        return None if self.written_at is None else self.now - self.written_at

    @property
    def router_now(self) -> float:
        """The router's own clock when it wrote (its queue's time), the clock
        its witness's times are on; the write's time when it wrote no queue.
        Staleness is judged on the write's time, by the reader's clock."""
        if self.queue is not None:
            return self.queue.at.timestamp()
        return self.written_at if self.written_at is not None else self.now

    @property
    def stale(self) -> bool:
        """The router has not written for `WITNESS_STALE_S` (or never): unknown."""
        ago = self.written_ago
        return ago is None or ago > WITNESS_STALE_S

    def reads(self, running: list[Instance], old: dict[int, ProverTrack]) -> dict[int, ProverRead]:
        """The read of each running machine (none at all while stale)."""
        if self.stale or self.written_at is None:
            return {}
        reads = {}
        for inst in running:
            seen = self.witnesses.get(inst.id)
            if seen is not None:
                reads[inst.id] = witness_read(seen, self.queue, self.router_now, old.get(inst.id))
            elif (why := self.refused.get(inst.id)) is not None:
                reads[inst.id] = ProverRead(ok=False, error=why)
            else:
                # A member the router has not written of yet (it reads the
                # members every 2 s and writes every 5 s, so a machine that
                # joined at this poll has none): starting, not failing; the
                # not-proving time runs from here.
                reads[inst.id] = ProverRead(
                    ok=True,
                    phase="starting",
                    detail="the router has not witnessed it yet",
                    time=self.router_now,
                )
        return reads

    def settle(self, inst: Instance, track: ProverTrack, now: float) -> ProverTrack:
        """`track` after its read, with what only the witness says: its
        rejections (suspect, never believed again), a joining machine's
        grace, and the agent's drain."""
        update: dict[str, object] = {}
        seen = self.witnesses.get(inst.id) if not self.stale else None
        if seen is not None:
            why = rejected_reason(seen)
            if why is not None and seen.rejected > track.rejected:
                update.update(rejected=seen.rejected, suspect=why, measured_proofs_per_hour=None)
            if seen.phase == "joining" and now - track.first_seen_at < joining_grace_s(
                inst.inet_down
            ):
                # Its parameters come down: not held against it (yet).
                update["progress_at"] = now
        drain_by = self.drains.get(inst.id)
        if drain_by is not None:
            since = drain_by - DRAIN_LIMIT_S  # drain_done's bound falls on drain_by
            if track.draining_since is None or since < track.draining_since:
                update["draining_since"] = since
        return track.model_copy(update=update) if update else track


class RouterLink:
    """Writes the members and reads the witness of an agent's fleet (the store)."""

    def __init__(self, store: Store, prover: ProverSpec) -> None:
        self._members = RouterMembers(store)
        self._witness = RouterWitness(store)
        self._port = front_port_of(prover)
        self._allow_loopback = prover.allow_loopback

    @property
    def skipped(self) -> int:
        """Rows read back that did not validate (left out), members and witness."""
        return self._members.skipped + self._witness.skipped

    def address(self, inst: Instance) -> str:
        """``host:port`` of `inst`'s front, checked as a status read's address
        is; `ValueError` (one line, why) when it is not mapped or refused."""
        url = status_url(inst, self._port, "", self._allow_loopback)
        return url.removeprefix("http://")

    def member(self, inst: Instance, drain_by: datetime | None = None) -> MemberSpec:
        """The member `inst` is (``drain`` when `drain_by` is given);
        `ValueError` when it can be none."""
        if not inst.label:
            raise ValueError("it has no label to name its certificate")
        gpus, rate = rented_capacity(inst)
        return MemberSpec(
            instance_id=inst.id,
            label=inst.label,
            address=self.address(inst),
            want="serve" if drain_by is None else "drain",
            drain_by=drain_by,
            gpus=gpus,
            expected_proofs_per_hour=rate,
        )

    async def look(self, agent_id: str, members: list[Instance], now: float) -> RouterLook:
        """Write this poll's members, then read the drains, the witness and
        the queue (one thread, three short transactions)."""
        specs, refused = [], {}
        for inst in members:
            if inst.phase != "running":
                continue
            try:
                specs.append(self.member(inst))
            except ValueError as exc:
                refused[inst.id] = f"no router member: {exc}"
        at = datetime.fromtimestamp(now, UTC)

        def io() -> tuple[list[MemberSpec], WitnessRead]:
            self._members.replace(agent_id, specs, at)
            return self._members.load(agent_id), self._witness.load(agent_id)

        stored, (witnesses, queue, written) = await asyncio.to_thread(io)
        drains = {
            m.instance_id: m.drain_by.timestamp()
            for m in stored
            if m.want == "drain" and m.drain_by is not None
        }
        return RouterLook(
            witnesses=witnesses,
            queue=queue,
            written_at=written.timestamp() if written is not None else None,
            now=now,
            drains=drains,
            refused=refused,
        )

    async def drain(self, agent_id: str, inst: Instance, now: float) -> str | None:
        """Mark `inst` ``drain`` until `DRAIN_LIMIT_S` from `now`: the router
        sends it no new work and takes its jobs back at that bound. None
        once written, else why not (the caller destroys it at once)."""
        at = datetime.fromtimestamp(now, UTC)
        try:
            spec = self.member(inst, drain_by=datetime.fromtimestamp(now + DRAIN_LIMIT_S, UTC))
        except ValueError as exc:
            return str(exc)
        await asyncio.to_thread(self._members.drain, agent_id, spec, at)
        return None

    async def forget(self, agent_id: str, instance_id: int) -> None:
        """`instance_id` is no member any more (destroyed): the router stops
        dialling it now, not at the monitor's next poll."""
        await asyncio.to_thread(self._members.remove, agent_id, instance_id)
