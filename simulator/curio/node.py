"""The Curio stand-in: what an operator's Curio node does against ``[Cuzk] Address``.

It touches one gRPC channel to the address (a router or a cuzk) and nothing
else. Each behaviour is Curio's (filecoin-project/curio):

- The client (``lib/cuzk/client.go``): an insecure channel with 256 MiB
  message limits (`fleet_agent.cuzk.service.channel_options`); a unary
  ``Prove`` under a ``ProveTimeout`` deadline per call; a result other than
  COMPLETED is an error, as is a response without one; ``HasCapacity`` is
  MaxPending minus pending + in_progress summed over ``GetStatus().queues``
  (GetStatus under a 5 s deadline; an error means no capacity).
- The task slots (``TaskMax()`` in the same file, used by ``tasks/seal/task_porep.go``
  ``TypeDetails``): one limiter of MaxPending shared by every cuzk task, taken
  when a task is claimed and given back when it ends: never more than
  MaxPending tasks at once. Curio no longer asks ``HasCapacity`` before
  claiming ("Remove the per-CanAccept HasCapacity() gRPC
  calls since the shared Max limiter handles backpressure"); `check_capacity`
  puts that check back (the client keeps it "for potential future multi-node use").
- The request (``lib/ffi/cuzk_funcs.go`` ``PoRepSnarkCuzk``): id
  ``porep-<miner>-<sector>``, POREP_SEAL_COMMIT, sector size, registered
  proof, NORMAL priority, the vanilla proof, sector and miner; or the
  proofshare id ``ps-porep-<miner>-<sector>-<taskID>``
  (``tasks/proofshare/task_prove.go``). Both are the same on every attempt of
  a task, so a retry carries the same id. An empty proof is an error; the
  proof is then verified locally (``ffi.VerifySeal``; here
  `simulator.snark.verify`) and one that does not verify fails the task.
- The retry (``harmony/harmonytask/task_type_handler.go``
  ``emitRetryTask`` / ``recordCompletion``): a failed task is dropped when
  ``retries >= MaxFailures - 1``, else ``retries`` goes up by one and it is
  ready again after ``RetryWait(retries)``; PoRep's ``TypeDetails`` says
  MaxFailures 10 and ``RetryWait = min(1s << retries, 2 min)``. The wait
  holds no task slot. A task that cannot be claimed for want of capacity is
  looked at again after ``idleTryInterval`` (1 s, ``harmonytask.go``).

Times Curio counts (ProveTimeout, RetryWait, the deadline, the capacity
poll) are in Curio's seconds and divided by `speed`, so a stand-in run at
speed 60 against cuzk stand-ins at speed 60 is the same hour in a minute.
The vanilla proof (really a JSON envelope of the C1 output, which the router
never reads) is a cheap 50 MB of random-ish bytes per sector: one random
block repeated behind a sector-specific header, made when an attempt starts
and dropped when it ends, so the stand-in holds only its in-flight inputs.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import time
from collections.abc import Sequence
from typing import Literal, Self

import grpc
import grpc.aio
from pydantic import BaseModel, ConfigDict, Field

from fleet_agent.cuzk.service import SERVICE, ProvingEngineStub, channel_options, pb
from simulator import snark
from simulator.demand import DEFAULT_DEADLINE_MINUTES, DemandConfig, parse_curve

from .records import Attempt, CurioSummary, JobRecord, summarize

__all__ = [
    "POREP_32G_PROOF",
    "SECTOR_32G",
    "CurioConfig",
    "CurioStandIn",
    "arrival_times",
    "porep_c2",
    "porep_request_id",
    "sample_porep",
    "vanilla_input",
]

#: A 32 GiB sector's size in bytes (SubmitProofRequest.sector_size).
SECTOR_32G = 32 << 30
#: RegisteredSealProof_StackedDrg32GiBV1_1 (curio lib/proof/porep_vproof_types.go).
POREP_32G_PROOF = 8
#: The random block the inputs repeat; the header before it makes each sector's own.
_BLOCK_BYTES = 1 << 20
_HEADER_BYTES = 64


def _identity(wire: bytes) -> bytes:
    return wire


class CurioConfig(BaseModel):
    """The node's settings: ``[Cuzk]`` of curio ``deps/config/types.go`` and
    the PoRep task's (``tasks/seal/task_porep.go``); times in Curio's seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: ``[Cuzk] Address``.
    cuzk: str = "127.0.0.1:9820"
    #: ``[Cuzk] MaxPending`` (default 10).
    max_pending: int = Field(default=10, ge=1)
    #: ``[Cuzk] ProveTimeout`` (default 30 min).
    prove_timeout_s: float = Field(default=1800.0, gt=0)
    #: The vanilla proof's size (a 32 GiB PoRep's is 50-200 MB).
    input_bytes: int = Field(default=50_000_000, ge=1)
    miner_id: int = Field(default=1000, ge=0)
    first_sector: int = Field(default=1, ge=0)
    #: ``porep``: ``porep-<miner>-<sector>``; ``ps-porep``: the proofshare task's id.
    id_style: Literal["porep", "ps-porep"] = "porep"
    #: PoRep's MaxFailures (0: retry forever).
    max_failures: int = Field(default=10, ge=0)
    #: RetryWait(retries) = min(retry_base_s << retries, retry_cap_s).
    retry_base_s: float = Field(default=1.0, ge=0)
    retry_cap_s: float = Field(default=120.0, ge=0)
    #: Ask HasCapacity before each claim (Curio did before its shared task limiter).
    check_capacity: bool = False
    #: harmonytask's idleTryInterval: when to look again after no capacity.
    capacity_poll_s: float = Field(default=1.0, gt=0)
    #: GetStatus's own deadline in client.go (real seconds: a network figure).
    status_timeout_s: float = Field(default=5.0, gt=0)
    #: Each proof must be done this long after it arrives (the snark market's 30 min).
    deadline_s: float = Field(default=DEFAULT_DEADLINE_MINUTES * 60, gt=0)
    #: The chance that recording a verified proof fails (task_porep.go's
    #: UPDATE of sectors_sdr_pipeline): the task is retried and the same
    #: request id is proven again. 0 in Curio's normal life.
    store_failure_p: float = Field(default=0.0, ge=0, le=1)
    #: Curio seconds per real second.
    speed: float = Field(default=1.0, gt=0)
    seed: int = 0


def porep_c2(
    sector: int,
    miner: int,
    vanilla: bytes,
    *,
    request_id: str | None = None,
    into: pb.SubmitProofRequest | None = None,
) -> pb.SubmitProofRequest:
    """``PoRepSnarkCuzk``'s request (lib/ffi/cuzk_funcs.go) for a 32 GiB
    sector, filled into `into` when given (a ProveRequest's ``submit``, so
    the input is copied once); the id is ``porep-<miner>-<sector>`` unless
    `request_id` says otherwise."""
    req = pb.SubmitProofRequest() if into is None else into
    req.request_id = porep_request_id(miner, sector) if request_id is None else request_id
    req.proof_kind = pb.POREP_SEAL_COMMIT
    req.sector_size = SECTOR_32G
    req.registered_proof = POREP_32G_PROOF
    req.priority = pb.NORMAL
    req.vanilla_proof = vanilla
    req.sector_number = sector
    req.miner_id = miner
    return req


def sample_porep(n: int, size: int = 1000, miner: int = 1000) -> pb.SubmitProofRequest:
    """A PoRep C2 for sector `n` with a `size`-byte input (tests and benches)."""
    return porep_c2(n, miner, bytes([n % 251]) * size)


def porep_request_id(miner: int, sector: int, task_id: int | None = None) -> str:
    """Curio's request id for a sector's PoRep: ``porep-<miner>-<sector>``
    (lib/ffi/cuzk_funcs.go), or with a task id the proofshare one
    ``ps-porep-<miner>-<sector>-<taskID>`` (tasks/proofshare/task_prove.go)."""
    if task_id is None:
        return f"porep-{miner}-{sector}"
    return f"ps-porep-{miner}-{sector}-{task_id}"


def vanilla_input(block: bytes, miner: int, sector: int, size: int) -> bytes:
    """`size` bytes for a sector's vanilla proof: a header made from the
    sector, then `block`, repeated. Different per sector, cheap to make."""
    header = hashlib.sha256(f"curio-standin:{miner}:{sector}".encode()).digest() * 2
    unit = header[:_HEADER_BYTES] + block
    reps, rest = divmod(size, len(unit))
    return b"".join([unit] * reps + [unit[:rest]])


def arrival_times(
    minutes: float,
    *,
    rate_per_hour: float | None = None,
    curve: str | None = None,
    start_hour: float = 0.0,
    seed: int = 0,
) -> list[float]:
    """Arrivals over `minutes` of Curio time (seconds from the start), from
    the simulator's demand (`simulator.demand.DemandConfig`: Poisson per
    minute): a flat `rate_per_hour`, or a daily `curve` ("hour:rate,...")
    read from `start_hour` on."""
    if (rate_per_hour is None) == (curve is None):
        raise ValueError("give a rate or a curve")
    points = parse_curve(curve) if curve is not None else ((0.0, float(rate_per_hour or 0)),)
    demand = DemandConfig(curve=points, seed=seed)
    start = start_hour * 3600.0
    end = start + minutes * 60.0
    out: list[float] = []
    for minute in range(int(start // 60), math.ceil(end / 60)):
        out += [t - start for t in demand.arrivals(minute, seed) if start <= t < end]
    return out


class CurioStandIn:
    """One Curio node's cuzk tasks against one address (see the module doc).

    Use as ``async with CurioStandIn(config) as node:``; `submit` a job or
    `run` a list of arrivals, then read `jobs` and `summary()`."""

    def __init__(self, config: CurioConfig) -> None:
        self.config = config
        self.jobs: list[JobRecord] = []
        self.max_in_flight = 0
        self.capacity_checks = 0
        self.capacity_waits = 0
        self._stub: ProvingEngineStub | None = None
        self._prove: grpc.aio.UnaryUnaryMultiCallable[bytes, pb.ProveResponse] | None = None
        self._channel: grpc.aio.Channel | None = None
        self._t0 = time.monotonic()
        self._block = random.Random(config.seed).randbytes(_BLOCK_BYTES)
        self._store_rng = random.Random(f"{config.seed}:store")
        self._next_sector = config.first_sector
        self._in_flight = 0
        self._open = 0
        self._all_ended = asyncio.Event()
        self._all_ended.set()
        self._ready: asyncio.Queue[JobRecord] = asyncio.Queue()
        self._slots = asyncio.Semaphore(config.max_pending)
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        self._scheduler: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start(self) -> None:
        """Open the channel and start claiming tasks."""
        self._channel = grpc.aio.insecure_channel(self.config.cuzk, options=channel_options())
        self._stub = ProvingEngineStub(self._channel)
        # Prove takes the request already serialized, so an attempt in flight
        # holds its 50 MB once (not as a message and its serialization too).
        self._prove = self._channel.unary_unary(
            f"/{SERVICE}/Prove",
            request_serializer=_identity,
            response_deserializer=pb.ProveResponse.FromString,
        )
        self._t0 = time.monotonic()
        self._scheduler = asyncio.create_task(self._schedule(), name="curio-scheduler")

    async def close(self) -> None:
        """Stop claiming, cancel the attempts in progress, close the channel."""
        for timer in self._timers:
            timer.cancel()
        pending = [t for t in (self._scheduler, *self._tasks) if t is not None]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._channel is not None:
            await self._channel.close(None)

    def now(self) -> float:
        """Seconds since the stand-in started (the records' clock)."""
        return time.monotonic() - self._t0

    # ------------------------------------------------------------ work in

    def submit(self, sector: int | None = None) -> JobRecord:
        """A sector's proof arrives now: a new task, ready to be claimed."""
        if sector is None:
            sector = self._next_sector
        self._next_sector = max(self._next_sector, sector + 1)
        task_id = len(self.jobs) + 1 if self.config.id_style == "ps-porep" else None
        now = self.now()
        job = JobRecord(
            request_id=porep_request_id(self.config.miner_id, sector, task_id),
            sector=sector,
            submitted=now,
            deadline=now + self.config.deadline_s / self.config.speed,
        )
        self.jobs.append(job)
        self._open += 1
        self._all_ended.clear()
        self._ready.put_nowait(job)
        return job

    async def run(self, arrivals: Sequence[float], drain_s: float | None = None) -> bool:
        """Submit a job at each arrival (Curio seconds from now), then wait up
        to `drain_s` Curio seconds (default: the deadline) for every job to
        end. True when all ended."""
        start = time.monotonic()
        for at in sorted(arrivals):
            delay = start + at / self.config.speed - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self.submit()
        drain = self.config.deadline_s if drain_s is None else drain_s
        return await self.wait_all(drain / self.config.speed)

    async def wait_all(self, within_s: float | None = None) -> bool:
        """Wait up to `within_s` real seconds until every job is done or dropped."""
        try:
            await asyncio.wait_for(self._all_ended.wait(), within_s)
        except TimeoutError:
            return False
        return True

    def summary(self) -> CurioSummary:
        """The figures of the jobs so far."""
        return summarize(
            self.jobs,
            speed=self.config.speed,
            max_in_flight=self.max_in_flight,
            capacity_checks=self.capacity_checks,
            capacity_waits=self.capacity_waits,
        )

    # ------------------------------------------------------------ the client

    @property
    def stub(self) -> ProvingEngineStub:
        if self._stub is None:
            raise RuntimeError("the stand-in is not started")
        return self._stub

    async def has_capacity(self) -> int:
        """client.go ``HasCapacity``: MaxPending - sum(pending + in_progress)
        over GetStatus's queues, at least 0; 0 when GetStatus fails."""
        self.capacity_checks += 1
        try:
            status = await self.stub.GetStatus(
                pb.GetStatusRequest(), timeout=self.config.status_timeout_s
            )
        except grpc.aio.AioRpcError:
            return 0
        queued = sum(q.pending + q.in_progress for q in status.queues)
        return max(0, self.config.max_pending - queued)

    # ------------------------------------------------------------ harmony

    async def _schedule(self) -> None:
        """Claim ready tasks, one slot of TaskMax each."""
        poll = self.config.capacity_poll_s / self.config.speed
        while True:
            job = await self._ready.get()
            await self._slots.acquire()
            try:
                while self.config.check_capacity and await self.has_capacity() <= 0:
                    self.capacity_waits += 1
                    await asyncio.sleep(poll)
            except BaseException:
                self._slots.release()
                raise
            job.state = "running"
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            task = asyncio.create_task(self._run(job), name=job.request_id)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, job: JobRecord) -> None:
        try:
            ok = await self._attempt(job)
        finally:
            self._in_flight -= 1
            self._slots.release()
        if ok:
            job.state = "done"
            job.done_at = self.now()
            self._ended()
        else:
            self._failed(job)

    def _failed(self, job: JobRecord) -> None:
        """harmony's recordCompletion + emitRetryTask for a failed task."""
        cfg = self.config
        if cfg.max_failures > 0 and job.retries >= cfg.max_failures - 1:
            job.state = "dropped"
            self._ended()
            return
        job.retries += 1
        job.state = "retry_wait"
        wait = min(cfg.retry_base_s * (1 << min(job.retries, 62)), cfg.retry_cap_s)
        loop = asyncio.get_running_loop()
        timer: asyncio.TimerHandle | None = None

        def ready() -> None:
            if timer is not None:
                self._timers.discard(timer)
            job.state = "waiting"
            self._ready.put_nowait(job)

        timer = loop.call_later(wait / cfg.speed, ready)
        self._timers.add(timer)

    def _ended(self) -> None:
        self._open -= 1
        if self._open == 0:
            self._all_ended.set()

    def _fill(self, req: pb.SubmitProofRequest, job: JobRecord) -> pb.SubmitProofRequest:
        """PoRepSnarkCuzk's request, its input made now."""
        cfg = self.config
        vanilla = vanilla_input(self._block, cfg.miner_id, job.sector, cfg.input_bytes)
        return porep_c2(job.sector, cfg.miner_id, vanilla, request_id=job.request_id, into=req)

    def _serialized(self, job: JobRecord) -> bytes:
        """The ProveRequest on the wire (filled in place: one copy of the input)."""
        prove = pb.ProveRequest()
        self._fill(prove.submit, job)
        return prove.SerializeToString()

    def _verify(self, job: JobRecord, proof: bytes) -> bool:
        """Curio's ffi.VerifySeal: `simulator.snark.verify` on the request, made again."""
        return snark.verify(self._fill(pb.SubmitProofRequest(), job), proof)

    async def _attempt(self, job: JobRecord) -> bool:
        """One Prove call, its status mapping and the local verification."""
        cfg = self.config
        attempt = Attempt(started=self.now())
        job.attempts.append(attempt)
        assert self._prove is not None, "the stand-in is not started"
        wire = await asyncio.to_thread(self._serialized, job)
        sent = time.monotonic()
        try:
            resp = await self._prove(wire, timeout=cfg.prove_timeout_s / cfg.speed)
        except grpc.aio.AioRpcError as err:
            code = err.code()
            attempt.outcome = (
                "timeout" if code == grpc.StatusCode.DEADLINE_EXCEEDED else f"rpc:{code.name}"
            )
            return self._end(attempt, sent, ok=False)
        if not resp.HasField("result"):
            attempt.outcome = "no_result"
            return self._end(attempt, sent, ok=False)
        result = resp.result
        attempt.cuzk_total_ms = result.total_ms
        attempt.cuzk_queue_wait_ms = result.queue_wait_ms
        if result.status != pb.AwaitProofResponse.COMPLETED:
            attempt.outcome = f"status:{pb.AwaitProofResponse.Status.Name(result.status)}"
            return self._end(attempt, sent, ok=False)
        if not result.proof:
            attempt.outcome = "empty"
            return self._end(attempt, sent, ok=False)
        rpc_end = time.monotonic()
        del wire
        attempt.verified = await asyncio.to_thread(self._verify, job, result.proof)
        if not attempt.verified:
            attempt.outcome = "bad_proof"
        elif self._store_rng.random() < cfg.store_failure_p:
            attempt.outcome = "store_failed"
        else:
            attempt.outcome = "ok"
        return self._end(attempt, sent, ok=attempt.outcome == "ok", rpc_end=rpc_end)

    def _end(
        self, attempt: Attempt, sent: float, *, ok: bool, rpc_end: float | None = None
    ) -> bool:
        attempt.rpc_s = (rpc_end if rpc_end is not None else time.monotonic()) - sent
        attempt.ended = self.now()
        return ok
