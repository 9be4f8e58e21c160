"""The stand-in's proving engine: a priority queue, GPU workers, a job tracker.

Shaped like curio's cuzk engine (``extern/cuzk/cuzk-core/src/engine.rs``,
``scheduler.rs``): one queue ordered by priority then submission; each GPU
worker takes the next request; the job id is the request id, and a request
submitted twice is queued twice (``Engine::submit`` pushes it again) while
every listener of that id gets the first result. ``GetStatus``'s queues come
from the scheduler queue only (``Scheduler::stats``), so a kind with nothing
waiting is absent even while it runs. Loaded circuits are those preloaded
(``preloaded_srs``): an on-demand load costs the time but is not listed.

Proofs are `simulator.snark.prove`'s; the behaviour (config.py) bends them.
Touches nothing outside the process. Time is simulated seconds: the event
loop's clock times the config's `speed`, unless the caller gives its own
`clock` and `sleep_until`, as the simulator's machines do to prove on the
simulator's clock (simulator/cuzk_hosts.py). A worker's proofs follow each
other on that clock: the next one starts when the last one was due to end
(or when it was submitted, if later), so a late wake-up of the loop is not
lost time, and a busy stand-in proves exactly its configured rate.
`on_proved` hears of each proof as it finishes.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fleet_agent.cuzk.kinds import KIND_NAMES, KNOWN_CIRCUITS, circuit_id, default_priority
from fleet_agent.cuzk.service import pb
from simulator import snark

from .config import StandInConfig

__all__ = ["JobNotFound", "Proved", "SleepUntil", "StandInEngine", "Worker"]

#: Waits until the engine's clock reads a given simulated time.
SleepUntil = Callable[[float], Awaitable[None]]
#: Told of each finished proof: its request, and whether its bytes are bad.
Proved = Callable[[pb.SubmitProofRequest, bool], None]

_Status = pb.AwaitProofResponse.Status
#: Hashing a vanilla proof this large blocks the loop for a noticeable time:
#: it moves to a thread (snark.py: ~0.1 s per 50 MB).
_THREAD_BYTES = 1 << 20


class JobNotFound(Exception):
    """AwaitProof for an id the engine never saw (``EngineError::JobNotFound``)."""


@dataclass
class Worker:
    """One GPU worker; `current` is (job id, kind Display) while it proves;
    `free_at` when its last proof was due to end (the engine's clock)."""

    ordinal: int
    current: tuple[str, str] | None = None
    free_at: float | None = None


@dataclass(order=True)
class _Entry:
    neg_priority: int
    seq: int
    request: pb.SubmitProofRequest = field(compare=False)
    submitted_at: float = field(compare=False)


class StandInEngine:
    """Queues and proves; `on_die` is called once when a ``dies`` stand-in dies.

    `config` may be replaced while it runs (a new behaviour): each proof and
    each answer reads it afresh."""

    def __init__(
        self,
        config: StandInConfig,
        on_die: Callable[[], None] | None = None,
        *,
        clock: Callable[[], float] | None = None,
        sleep_until: SleepUntil | None = None,
        on_proved: Proved | None = None,
    ) -> None:
        self.config = config
        self.on_die = on_die
        self.on_proved = on_proved
        self._sleep_until = sleep_until
        self._clock = clock or self._loop_clock
        self.started_at = self._clock()
        self.workers = [Worker(i) for i in range(config.gpus)]
        self.preloaded: dict[str, int] = dict.fromkeys(config.preload, 0)
        self._on_demand: set[str] = set()
        self._queue: list[_Entry] = []
        self._seq = itertools.count()
        self._work = asyncio.Event()
        self._listeners: dict[str, list[asyncio.Future[pb.AwaitProofResponse]]] = {}
        self._completed: dict[str, pb.AwaitProofResponse] = {}
        self.total_completed = 0
        self.total_failed = 0
        self.completed_by_kind: dict[int, int] = {}
        self.failed_by_kind: dict[int, int] = {}
        self.recent_durations: list[tuple[int, float]] = []
        #: Request ids this engine finished proving, in order (for tests and bench).
        self.proved: list[str] = []
        self.dead = False
        self._tasks: list[asyncio.Task[None]] = []

    def _loop_clock(self) -> float:
        return time.monotonic() * self.config.speed

    def now(self) -> float:
        """The engine's clock: simulated seconds."""
        return self._clock()

    async def sleep_until(self, at: float) -> None:
        """Wait until the clock reads `at`."""
        if self._sleep_until is not None:
            await self._sleep_until(at)
        else:
            await asyncio.sleep(max(0.0, self.config.real(at - self._clock())))

    async def sleep(self, sim_seconds: float) -> None:
        """Wait `sim_seconds` of simulated time."""
        await self.sleep_until(self._clock() + sim_seconds)

    def start(self) -> None:
        """Start the GPU workers (and the death timer of a ``dies`` stand-in)."""
        self._tasks = [asyncio.create_task(self._work_loop(w)) for w in self.workers]
        b = self.config.behaviour
        if b.mode == "dies" and b.die_at_s is not None:
            self._tasks.append(asyncio.create_task(self._die_at(b.die_at_s)))

    async def stop(self) -> None:
        """Stop the workers; listeners still waiting are cancelled."""
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for futs in self._listeners.values():
            for f in futs:
                f.cancel()
        self._listeners.clear()

    # -- submitting -------------------------------------------------------

    def submit(self, request: pb.SubmitProofRequest) -> tuple[str, int]:
        """Queue `request` (``Engine::submit``); returns (job id, queue position)."""
        job_id = request.request_id or f"job-{next(self._seq)}"
        req = pb.SubmitProofRequest()
        req.CopyFrom(request)
        req.request_id = job_id
        priority = req.priority or default_priority(req.proof_kind)
        position = len(self._queue)
        heapq.heappush(self._queue, _Entry(-priority, next(self._seq), req, self._clock()))
        self._listeners.setdefault(job_id, [])
        self._work.set()
        return job_id, position

    async def prove(self, request: pb.SubmitProofRequest) -> pb.AwaitProofResponse:
        """Submit and wait (``Engine::prove``)."""
        fut: asyncio.Future[pb.AwaitProofResponse] = asyncio.get_running_loop().create_future()
        job_id, _ = self.submit(request)
        self._listeners[job_id].append(fut)
        return await fut

    async def await_proof(self, job_id: str) -> pb.AwaitProofResponse:
        """The result of `job_id`, waiting if it is still queued or running."""
        if job_id in self._completed:
            return self._completed[job_id]
        if job_id not in self._listeners:
            raise JobNotFound(job_id)
        fut: asyncio.Future[pb.AwaitProofResponse] = asyncio.get_running_loop().create_future()
        self._listeners[job_id].append(fut)
        return await fut

    # -- circuits ---------------------------------------------------------

    async def preload(self, circuit: str) -> tuple[bool, int]:
        """PreloadSRS: (already loaded, load ms); ValueError for an unknown id."""
        if circuit not in KNOWN_CIRCUITS:
            raise ValueError(f"unknown circuit ID: {circuit}")
        if circuit in self.preloaded:
            return True, 0
        # The configured time exactly (a late wake-up is the loop's, not cuzk's).
        seconds = self.config.preload_seconds
        await self.sleep(seconds)
        ms = int(seconds * 1000)
        self.preloaded[circuit] = ms
        self._on_demand.add(circuit)
        return False, ms

    # -- status -----------------------------------------------------------

    def queue_stats(self) -> list[tuple[int, int]]:
        """(kind, waiting) for each kind with requests waiting (``Scheduler::stats``)."""
        counts: dict[int, int] = {}
        for e in self._queue:
            counts[e.request.proof_kind] = counts.get(e.request.proof_kind, 0) + 1
        return list(counts.items())

    def uptime_seconds(self) -> int:
        """Whole seconds since start."""
        return int(self._clock() - self.started_at)

    # -- proving ----------------------------------------------------------

    async def _work_loop(self, worker: Worker) -> None:
        while True:
            while not self._queue:
                self._work.clear()
                await self._work.wait()
            entry = heapq.heappop(self._queue)
            req = entry.request
            worker.current = (req.request_id, KIND_NAMES.get(req.proof_kind, "?"))
            try:
                await self._prove_one(entry, worker)
            finally:
                worker.current = None

    async def _prove_one(self, entry: _Entry, worker: Worker) -> None:
        req, cfg, b = entry.request, self.config, self.config.behaviour
        kind = KIND_NAMES[req.proof_kind]
        # When it really began: on the heels of the worker's last proof, or
        # at its submission (never in the future, whatever the clock says).
        begin = min(self._clock(), max(entry.submitted_at, worker.free_at or entry.submitted_at))
        started = begin
        circuit = circuit_id(req.proof_kind, req.sector_size)
        if circuit not in self.preloaded and circuit not in self._on_demand:
            # Loaded on demand: it costs the load, and preloaded_srs does not list it.
            begin += cfg.preload_seconds
            await self.sleep_until(begin)
            self._on_demand.add(circuit)
        seconds = cfg.proof_seconds.get(kind, 60.0)
        if b.mode == "slow":
            seconds *= b.slow_factor
        if b.mode == "trickle":
            await asyncio.Event().wait()  # never finishes
        if (
            b.mode == "dies"
            and b.die_after_proofs is not None
            and self.total_completed >= b.die_after_proofs
        ):
            await self.sleep_until(begin + seconds / 2)
            self._die()
            await asyncio.Event().wait()
        end = begin + seconds
        await self.sleep_until(end)
        worker.free_at = end
        proof = await self._proof(req)
        # The behaviour when the proof is done (it may have changed meanwhile).
        bad = self.config.behaviour.mode == "bad"
        if bad:
            proof = bytes(x ^ 0x5A for x in proof)
        elapsed = end - started
        total_ms = int((end - entry.submitted_at) * 1000)
        proving_ms = int(elapsed * 1000)
        # Phase 0 timings: srs_load, synthesis and gpu_compute all carry the
        # monolithic proving time (cuzk-core types.rs ProofTimings).
        result = pb.AwaitProofResponse(
            job_id=req.request_id,
            status=_Status.COMPLETED,
            proof=proof,
            queue_wait_ms=max(0, total_ms - proving_ms),
            srs_load_ms=proving_ms,
            synthesis_ms=proving_ms,
            gpu_compute_ms=proving_ms,
            total_ms=total_ms,
        )
        self.total_completed += 1
        self.completed_by_kind[req.proof_kind] = self.completed_by_kind.get(req.proof_kind, 0) + 1
        self.recent_durations = [*self.recent_durations[-99:], (req.proof_kind, elapsed)]
        self.proved.append(req.request_id)
        if self.on_proved is not None:
            self.on_proved(req, bad)
        self._finish(req.request_id, result)

    async def _proof(self, req: pb.SubmitProofRequest) -> bytes:
        size = len(req.vanilla_proof) + sum(len(v) for v in req.vanilla_proofs)
        if size > _THREAD_BYTES:
            return await asyncio.to_thread(snark.prove, req)
        return snark.prove(req)

    def _finish(self, job_id: str, result: pb.AwaitProofResponse) -> None:
        self._completed[job_id] = result
        for fut in self._listeners.pop(job_id, []):
            if not fut.done():
                fut.set_result(result)

    async def _die_at(self, sim_seconds: float) -> None:
        await self.sleep(sim_seconds)
        self._die()

    def _die(self) -> None:
        if self.dead:
            return
        self.dead = True
        if self.on_die is not None:
            self.on_die()
