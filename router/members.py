"""The router's members: what it measured of each machine, and how it reaches them.

`Member` holds one machine's spec (from the agent), its client, what its
last GetStatus showed that the router uses (that it answered, its loaded
circuits, its GPU count capped for spreading and never above the GPUs the
agent says were rented) and its `WitnessBook`; its expected time per job
comes from the agent's capacity estimate when the spec carries one.
`MemberSet.apply` turns a new list of `MemberSpec` into added, changed and
removed members. No I/O here besides `insecure_connect`, which opens a
channel (TLS channels come from fleet_agent/cuzk/channels.py in production).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import grpc.aio

from fleet_agent.cuzk.kinds import CIRCUIT_PATTERN, KIND_NAMES
from fleet_agent.cuzk.service import ProvingEngineStub, channel_options, pb
from fleet_agent.cuzk.witness import MachineWitness, MemberSpec, WitnessPhase

from .config import RouterConfig
from .witness import WitnessBook, failing_reason, phase_of

__all__ = [
    "Changes",
    "ChannelClient",
    "Connect",
    "Member",
    "MemberClient",
    "MemberSet",
    "SupportsClose",
    "insecure_connect",
    "utc",
]

#: The kind an `expected_proofs_per_hour` counts (the capacity model's unit).
_POREP = KIND_NAMES[pb.POREP_SEAL_COMMIT]


class MemberClient(Protocol):
    """What the router calls on a member (`ProvingEngineStub` is one)."""

    async def ProveRaw(self, request: bytes, **kw: Any) -> pb.ProveResponse:
        """Prove with ``ProveRequest`` wire bytes sent as they are: a job's
        payload, never copied into a message per attempt."""
        ...

    async def GetStatus(self, request: pb.GetStatusRequest, **kw: Any) -> pb.GetStatusResponse: ...

    async def CancelProof(
        self, request: pb.CancelProofRequest, **kw: Any
    ) -> pb.CancelProofResponse: ...

    async def PreloadSRS(
        self, request: pb.PreloadSrsRequest, **kw: Any
    ) -> pb.PreloadSrsResponse: ...


@runtime_checkable
class SupportsClose(Protocol):
    """A client that owns its channel: the router closes it when the member leaves."""

    async def close(self) -> None: ...


#: Makes the client for a member: insecure here and in tests, TLS per machine
#: in production (fleet_agent.cuzk.channels.machine_channel).
Connect = Callable[[MemberSpec], MemberClient]


class ChannelClient(ProvingEngineStub):
    """A stub that owns its channel."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        super().__init__(channel)
        self.channel = channel

    async def close(self) -> None:
        """Close the channel (calls in flight are cancelled)."""
        await self.channel.close(None)


def insecure_connect(spec: MemberSpec) -> ChannelClient:
    """A plaintext channel to `spec.address` with Curio's message limits."""
    return ChannelClient(grpc.aio.insecure_channel(spec.address, options=channel_options()))


def utc(t: float) -> datetime:
    """The router clock's `t` (Unix seconds) as an aware datetime."""
    return datetime.fromtimestamp(t, UTC)


@dataclass(eq=False)
class Member:
    """One machine as the router knows it."""

    spec: MemberSpec
    client: MemberClient
    added_at: float
    book: WitnessBook
    #: The host's GetStatus GPU count, at least 1, capped (`max_gpus_counted`).
    reported_gpus: int = 1
    circuits: frozenset[str] = frozenset()
    answered_at: float | None = None
    #: Its last GetStatus answered and no call to it failed since.
    reachable: bool = False
    joined: bool = False
    #: Sticky: once failing, it stays so until the agent replaces it.
    failing: str | None = None
    phase: WitnessPhase = "joining"
    reason: str = ""
    since: float = 0.0
    preloading: set[str] = field(default_factory=set)
    #: Job ids in flight on it.
    jobs: set[str] = field(default_factory=set)

    @property
    def instance_id(self) -> int:
        """The vast.ai instance id."""
        return self.spec.instance_id

    @property
    def gpus(self) -> int:
        """GPUs counted for spreading and depth: the host's count, never more
        than the agent says were rented (`MemberSpec.gpus`)."""
        rented = self.spec.gpus
        return self.reported_gpus if rented is None else min(self.reported_gpus, rented)

    def expected_seconds(self, kind: str, cfg: RouterConfig, speed: float = 1.0) -> float:
        """Expected seconds of one job of `kind` on this machine: from the agent's
        `expected_proofs_per_hour` when given (a PoRep takes 3600 x GPUs / rate
        on one GPU; other kinds in the config's proportion), else the config's.
        `speed`: simulated seconds per real one of a simulated fleet, whose
        rates are the model's simulated hours (the config's are scaled already)."""
        rate = self.spec.expected_proofs_per_hour
        if rate is None:
            return cfg.expected(kind)
        porep_s = 3600.0 * (self.spec.gpus or self.gpus) / rate / speed
        return porep_s * cfg.expected(kind) / cfg.expected(_POREP)

    def observe_status(self, now: float, status: pb.GetStatusResponse, cfg: RouterConfig) -> None:
        """It answered GetStatus: keep that it answered, its circuits, its GPU count."""
        self.answered_at = now
        self.reachable = True
        self.reported_gpus = max(1, min(len(status.gpus), cfg.max_gpus_counted))
        circuits = [s.circuit_id for s in status.loaded_srs if CIRCUIT_PATTERN.match(s.circuit_id)]
        self.circuits = frozenset(sorted(set(circuits))[:16])
        if self.circuits:
            self.joined = True

    def observe_silence(self) -> None:
        """GetStatus (or a call) failed: no new work until it answers again."""
        self.reachable = False

    def capacity(self, cfg: RouterConfig) -> int:
        """Jobs it may hold at once."""
        return cfg.per_gpu_depth * self.gpus

    def load(self) -> float:
        """Jobs in flight per GPU."""
        return self.book.in_flight / self.gpus

    def drain_overdue(self, now: float) -> bool:
        """It is draining and its `drain_by` has passed."""
        by = self.spec.drain_by
        return self.spec.want == "drain" and by is not None and by.timestamp() <= now

    def refresh(self, now: float, cfg: RouterConfig) -> WitnessPhase:
        """Recompute its phase from what the router measured."""
        if self.failing is None:
            self.failing = failing_reason(
                self.book, fail_streak=cfg.fail_streak, reject_limit=cfg.reject_limit
            )
        phase, reason = phase_of(
            now=now,
            failing=self.failing,
            added_at=self.added_at,
            answered_at=self.answered_at,
            dead_after_s=cfg.dead_after_s,
            draining=self.spec.want == "drain",
            joined=self.joined,
            in_flight=self.book.in_flight,
        )
        if phase != self.phase:
            self.since = now
        self.phase, self.reason = phase, reason
        return phase

    def witness(self, now: float) -> MachineWitness:
        """Its row for the agent (all figures the router's own)."""
        b = self.book
        return MachineWitness(
            instance_id=self.instance_id,
            phase=self.phase,
            reason=self.reason[:500],
            since=utc(self.since),
            sent=b.sent,
            done=b.done,
            failed=b.failed,
            rejected=b.rejected,
            lost=b.lost,
            in_flight=b.in_flight,
            busy_seconds=b.busy_seconds(now),
            proofs_per_busy_hour=b.rate(now),
            last_sent_at=utc(b.last_sent_at) if b.last_sent_at is not None else None,
            last_done_at=utc(b.last_done_at) if b.last_done_at is not None else None,
            circuits=sorted(self.circuits),
        )


class MemberSet:
    """The current members by instance id."""

    def __init__(self) -> None:
        self.by_id: dict[int, Member] = {}

    def __iter__(self) -> Iterator[Member]:
        return iter(list(self.by_id.values()))

    def get(self, instance_id: int) -> Member | None:
        """The member with `instance_id`, if it is one."""
        return self.by_id.get(instance_id)

    def apply(
        self, specs: list[MemberSpec], now: float, connect: Connect, cfg: RouterConfig
    ) -> Changes:
        """Make the members `specs`, connecting to the new ones.

        A member whose address or label changed is `readdressed`: its jobs in
        flight are on the old client (the caller takes them back before
        closing it), it gets a new client, its counts stay. The last spec of
        an instance id wins."""
        wanted = {s.instance_id: s for s in specs}
        changes = Changes()
        changes.removed = [m for i, m in self.by_id.items() if i not in wanted]
        for gone in changes.removed:
            del self.by_id[gone.instance_id]
            changes.stale.append(gone.client)
        for i, spec in wanted.items():
            m = self.by_id.get(i)
            if m is None:
                new = Member(spec, connect(spec), now, WitnessBook(cfg.rate_window_s), since=now)
                self.by_id[i] = new
                changes.added.append(new)
                continue
            if (spec.address, spec.label) != (m.spec.address, m.spec.label):
                changes.stale.append(m.client)
                changes.readdressed.append(m)
                m.client = connect(spec)
                m.reachable = False
            m.spec = spec
        return changes


@dataclass
class Changes:
    """What `MemberSet.apply` changed."""

    added: list[Member] = field(default_factory=list)
    removed: list[Member] = field(default_factory=list)
    readdressed: list[Member] = field(default_factory=list)
    #: Clients no member uses any more: close them once their calls are taken back.
    stale: list[MemberClient] = field(default_factory=list)
