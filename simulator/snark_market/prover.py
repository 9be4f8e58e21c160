"""Who proves the operator's queue rows: the `Prover` interface and two of them.

The node hands each row it gives a machine to a `Prover` (``PSProve`` in
curio tasks/proofshare/task_prove.go: one task per proof, as many at once as
the machines take) and hears back through the ``done`` callback it attached.

- `SimulatedProver` touches only the `Scheduler`: N GPUs, one proof each, a
  fixed time per kind, and a seeded chance that an attempt fails (harmony
  retries it). Pure, so the market can be tested alone.
- `AsyncProver` touches an asyncio loop the caller runs: each proof is a
  coroutine (``prove(job) -> bool``: for instance a ``Prove`` call to the
  router or a cuzk, as simulator/curio/node.py makes them), and its end is
  stamped with the simulator's clock and delivered at the next `pump`. Its
  timing is real, so only the pure prover keeps a run reproducible.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from .config import ProofKind
from .events import Scheduler

__all__ = ["AsyncProver", "DoneCallback", "ProofJob", "Prover", "SimulatedProver"]


@dataclass(frozen=True, slots=True)
class ProofJob:
    """One attempt at a row's proof: Curio's ``PSProve`` task."""

    request_cid: str
    kind: ProofKind
    task_id: int
    #: Attempts before this one (harmony_task.retries).
    retries: int = 0


#: ``done(job, ok)``: the attempt ended, with a verified proof or not.
DoneCallback = Callable[[ProofJob, bool], None]


class Prover(Protocol):
    """What the node needs of its machines."""

    def attach(self, sched: Scheduler, done: DoneCallback) -> None:
        """Report each attempt's end through `done`, on `sched`'s time."""

    def free(self) -> int:
        """How many more proofs it takes now."""

    def start(self, job: ProofJob) -> None:
        """Begin `job` (only while `free` is above 0)."""

    def pump(self) -> None:
        """Deliver the ends that happened outside the scheduler (before it runs on)."""


class SimulatedProver:
    """`gpus` GPUs, one proof each, `porep_s` / `snap_s` seconds a proof; an
    attempt fails with probability `fail_rate` (from its own seeded stream)."""

    def __init__(
        self,
        gpus: int,
        *,
        porep_s: float = 120.0,
        snap_s: float = 192.0,
        fail_rate: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.gpus = gpus
        self.times: dict[ProofKind, float] = {"porep": porep_s, "snap": snap_s}
        self.fail_rate = fail_rate
        self.busy = 0
        self.proved = 0
        self.failed = 0
        self._rng = random.Random(f"{seed}:snark-node-prover")
        self._sched: Scheduler | None = None
        self._done: DoneCallback | None = None

    def attach(self, sched: Scheduler, done: DoneCallback) -> None:
        self._sched, self._done = sched, done

    def free(self) -> int:
        return max(0, self.gpus - self.busy)

    def start(self, job: ProofJob) -> None:
        sched = self._sched
        if sched is None:
            raise RuntimeError("the prover is not attached to a node")
        self.busy += 1
        ok = self._rng.random() >= self.fail_rate
        sched.after(self.times[job.kind], lambda: self._end(job, ok))

    def _end(self, job: ProofJob, ok: bool) -> None:
        self.busy -= 1
        if ok:
            self.proved += 1
        else:
            self.failed += 1
        if self._done is not None:
            self._done(job, ok)

    def pump(self) -> None:
        return None


class AsyncProver:
    """Proofs as coroutines on `loop` (another thread's), at most `slots` at
    once; `clock` is the simulator's (each end is stamped with it)."""

    def __init__(
        self,
        prove: Callable[[ProofJob], Awaitable[bool]],
        slots: int,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], float],
    ) -> None:
        self._prove = prove
        self.slots = slots
        self._loop = loop
        self._clock = clock
        self._lock = threading.Lock()
        self._running = 0
        self._ended: list[tuple[float, ProofJob, bool]] = []
        self._sched: Scheduler | None = None
        self._done: DoneCallback | None = None

    def attach(self, sched: Scheduler, done: DoneCallback) -> None:
        self._sched, self._done = sched, done

    def free(self) -> int:
        with self._lock:
            return max(0, self.slots - self._running)

    def start(self, job: ProofJob) -> None:
        with self._lock:
            self._running += 1
        asyncio.run_coroutine_threadsafe(self._run(job), self._loop)

    async def _run(self, job: ProofJob) -> None:
        try:
            ok = bool(await self._prove(job))
        except Exception:  # a failed call is a failed attempt, as in Curio
            ok = False
        with self._lock:
            self._ended.append((self._clock(), job, ok))

    def pump(self) -> None:
        with self._lock:
            ended, self._ended = self._ended, []
        sched, done = self._sched, self._done
        if sched is None or done is None:
            return
        for at, job, ok in ended:
            sched.at(at, partial(self._end, job, ok, done))

    def _end(self, job: ProofJob, ok: bool, done: DoneCallback) -> None:
        with self._lock:
            self._running -= 1
        done(job, ok)
