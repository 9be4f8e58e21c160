"""The router's jobs: one per request id in flight, and the answers it gave.

`JobTable.admit` is the idempotency rule (docs/decisions/router-and-market.md, "A request id is the
idempotency key, and its return is a rejection"): a request id already
in flight joins its job (same job id, same answer); one the router answered
COMPLETED, and that answer reached a caller, comes back only because Curio's
verification refused the proof, so it is a *rejection* of the machine that
answered, and a new job that machine may not take; an answer no caller
received is given again. Inputs held in memory are counted against a cap:
past it a new job is refused (`HeldBytesFull`), nothing held is dropped.

No gRPC here; asyncio only for the event a job's waiters wait on. Deadlines
are event-loop times; other times are the router's clock.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from fleet_agent.cuzk.kinds import KIND_NAMES, circuit_id, default_priority
from fleet_agent.cuzk.service import pb

from .config import RouterConfig
from .inputs import MalformedInput, ProofInput, read_message

__all__ = [
    "Admission",
    "Answer",
    "Attempt",
    "HeldBytesFull",
    "InvalidRequest",
    "Job",
    "JobTable",
    "request_bytes",
]

_Status = pb.AwaitProofResponse.Status

#: Why the router took an attempt back from a machine.
TakeBack = Literal["drain bound", "removed", "readdressed", "cancelled", "closing"]


class HeldBytesFull(Exception):
    """Admitting the request would hold more input bytes than the cap."""


class InvalidRequest(Exception):
    """The request is not one cuzk would take (its text is cuzk's error)."""


def request_bytes(req: pb.SubmitProofRequest | ProofInput) -> int:
    """Bytes the router holds for `req` while its job lives."""
    return req.size if isinstance(req, ProofInput) else req.ByteSize()


@dataclass
class Attempt:
    """One send of a job to a machine."""

    member_id: int
    #: Router clock when sent.
    started_at: float
    #: Seconds the machine gets; `bounded` when the job's deadline cut it short.
    budget_s: float
    bounded: bool
    task: asyncio.Task[None] | None = None
    #: Set when the router takes the job back before the machine answers.
    take_back: TakeBack | None = None


@dataclass(eq=False)
class Job:
    """A request id being proved."""

    job_id: str
    #: The ``ProveRequest`` wire bytes sent to each machine as they are: the
    #: job's only copy of its input (never copied per attempt).
    payload: bytes
    kind: str
    circuit: str
    priority: int
    seq: int
    size: int
    #: Event-loop time past which the job fails TIMEOUT.
    deadline: float
    created_at: float
    state: Literal["pending", "running", "done"] = "pending"
    attempt: Attempt | None = None
    attempts: int = 0
    #: Machines it was sent to (another is preferred for a retry).
    tried: set[int] = field(default_factory=set)
    #: Machines whose answer to this request id Curio rejected: never again.
    refused_by: set[int] = field(default_factory=set)
    result: pb.AwaitProofResponse | None = None
    answered_by: int | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    timer: asyncio.TimerHandle | None = None


@dataclass
class Answer:
    """What the router answered a request id."""

    job_id: str
    status: int
    member_id: int | None
    at: float
    #: A caller received it (its Prove or AwaitProof returned it).
    delivered: bool
    refused_by: frozenset[int]


@dataclass
class Admission:
    """The outcome of `JobTable.admit`."""

    job: Job | None = None
    #: A kept answer (and its body) no caller had received: given as is.
    answer: Answer | None = None
    result: pb.AwaitProofResponse | None = None
    joined: bool = False
    #: The machine whose earlier answer this resubmission rejects.
    rejected_member: int | None = None


class JobTable:
    """Live jobs by request id, the answers given, and the bytes held."""

    def __init__(self, config: RouterConfig) -> None:
        self.config = config
        self.live: dict[str, Job] = {}
        self.answers: OrderedDict[str, Answer] = OrderedDict()
        #: The newest answers' bodies (AwaitProof, and a caller that lost one).
        self.results: OrderedDict[str, pb.AwaitProofResponse] = OrderedDict()
        self.held_bytes = 0
        #: A Submit was refused for the cap and nothing was freed since.
        self.full = False
        self._seq = itertools.count(1)
        self.submitted = 0
        self.joined = 0
        self.completed = 0
        self.failed = 0
        self.refused = 0
        self.rejections = 0
        self.redelivered = 0

    def admit(
        self, request: ProofInput | pb.SubmitProofRequest, deadline: float, now: float
    ) -> Admission:
        """Join, answer again, or start a job for `request` (see the module's rule).
        Its payload is made (`ProofInput.prove_bytes`) only for a new job."""
        try:
            inp = request if isinstance(request, ProofInput) else read_message(request)
        except MalformedInput as err:
            raise InvalidRequest(str(err)) from None
        req = inp.header
        if req.proof_kind not in KIND_NAMES:
            raise InvalidRequest(f"invalid proof_kind: {req.proof_kind}")
        rid = req.request_id
        job = self.live.get(rid) if rid else None
        if job is not None:
            self.joined += 1
            job.deadline = max(job.deadline, deadline)
            return Admission(job=job, joined=True)
        refused_by: frozenset[int] = frozenset()
        rejected: int | None = None
        prior = self.answers.get(rid) if rid else None
        if prior is not None:
            kept = self.results.get(rid)
            if prior.status == _Status.COMPLETED and not prior.delivered and kept is not None:
                self.redelivered += 1
                return Admission(answer=prior, result=kept)
            refused_by = prior.refused_by
            if (
                prior.status == _Status.COMPLETED
                and prior.delivered
                and prior.member_id is not None
            ):
                rejected = prior.member_id
                refused_by = refused_by | {prior.member_id}
        size = inp.size
        if self.held_bytes + size > self.config.max_held_bytes:
            self.refused += 1
            self.full = True
            raise HeldBytesFull(
                f"router holds {self.held_bytes} bytes of inputs; "
                f"{size} more would pass its cap of {self.config.max_held_bytes}"
            )
        if prior is not None:
            del self.answers[rid]
        if rejected is not None:
            self.rejections += 1
        seq = next(self._seq)
        job = Job(
            job_id=rid or f"router-{seq}",
            payload=inp.prove_bytes(),
            kind=KIND_NAMES[req.proof_kind],
            circuit=circuit_id(req.proof_kind, req.sector_size),
            priority=req.priority or default_priority(req.proof_kind),
            seq=seq,
            size=size,
            deadline=deadline,
            created_at=now,
            refused_by=set(refused_by),
        )
        self.live[job.job_id] = job
        self.held_bytes += size
        self.submitted += 1
        return Admission(job=job, rejected_member=rejected)

    def finish(
        self, job: Job, result: pb.AwaitProofResponse, member_id: int | None, now: float
    ) -> None:
        """End `job` with `result`: release its bytes, remember the answer, wake waiters."""
        if job.state == "done":
            return
        job.state = "done"
        result.job_id = job.job_id
        job.result, job.answered_by = result, member_id
        if job.timer is not None:
            job.timer.cancel()
        if self.live.get(job.job_id) is job:
            del self.live[job.job_id]
        self.held_bytes -= job.size
        self.full = False
        if result.status == _Status.COMPLETED:
            self.completed += 1
        else:
            self.failed += 1
        self.answers[job.job_id] = Answer(
            job_id=job.job_id,
            status=result.status,
            member_id=member_id,
            at=now,
            delivered=False,
            refused_by=frozenset(job.refused_by),
        )
        self.answers.move_to_end(job.job_id)
        self.results[job.job_id] = result
        self.results.move_to_end(job.job_id)
        while len(self.results) > self.config.keep_results:
            self.results.popitem(last=False)
        self._trim(now)
        job.done.set()

    def delivered(self, job_id: str) -> None:
        """A caller received the answer to `job_id`: a resubmission now rejects it."""
        answer = self.answers.get(job_id)
        if answer is not None:
            answer.delivered = True

    def pending(self) -> list[Job]:
        """Jobs waiting for a machine, most urgent first (priority, then arrival)."""
        waiting = [j for j in self.live.values() if j.state == "pending"]
        return sorted(waiting, key=lambda j: (-j.priority, j.seq))

    def running(self) -> list[Job]:
        """Jobs on a machine now."""
        return [j for j in self.live.values() if j.state == "running"]

    def _trim(self, now: float) -> None:
        horizon = now - self.config.remember_answers_s
        while self.answers:
            oldest = next(iter(self.answers.values()))
            if len(self.answers) <= self.config.remember_answers and oldest.at >= horizon:
                break
            self.answers.popitem(last=False)
