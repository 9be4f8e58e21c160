"""The operator's node proving on the agent's fleet: the vast simulator's rented machines.

`FleetProver` is a `Prover` (prover.py) whose GPUs are the machines the vast
simulator rents out, seen exactly as the simulator's demand queue sees them
(simulator/work_queue.py ``MachineView``, made by simulator/demand_market.py
``machine_views``):

- a machine takes jobs while it ``pulls`` (running, its prover proving, not
  stuck, not draining), up to its ``slots`` proofs at once
  (``fleet_agent.fleet.capacity.concurrent_proofs``); a job goes to the
  machine with the most free slots (ties: the lowest instance id), as idle
  harmony machines take tasks first;
- a PoRep takes the machine's ``seconds_per_proof`` (3600 x slots / the
  proofs per hour the capacity model gives it, with the instance's jitter),
  a Snap `SNAP_FACTOR` (1.6) times that;
- a machine that stops holding its work (destroyed, stopped, dead, frozen,
  its prover failed or restarted: ``holds`` false or a new ``started_at``)
  ends its jobs failed, at the job's end or at the next check (every
  `CHECK_S` on the market's clock), and the node retries them after harmony's
  wait (node.py); a stuck prover holds its jobs and finishes none until it
  is lost.

It touches the `Scheduler` and the ``views(t)`` callable only: every look at
the fleet is at an event's time on the market's clock, so a seed and a
sequence of clock steps give one history. `prover_fields` gives each
machine's status counters (what ``GET /status`` reports of its work), as
``WorkQueue.prover_fields`` does for the demand queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .config import SNAP_FACTOR
from .events import Scheduler
from .prover import DoneCallback, ProofJob

if TYPE_CHECKING:
    from simulator.work_queue import MachineView

__all__ = ["CHECK_S", "FleetProver", "FleetViews"]

#: Sim seconds between two looks for machines lost mid-proof (ours: the
#: node's prove tick, task_prove.go ``ProveAdderInterval``).
CHECK_S = 10.0
#: ``views(t)``: every rented machine as it stands at sim time `t`.
FleetViews = Callable[[float], Iterable["MachineView"]]


@dataclass(slots=True)
class _Run:
    """One job on one machine's prover process (`epoch`: its ``started_at``)."""

    job: ProofJob
    machine: int
    epoch: float | None
    started: float
    slots: int
    ended: bool = False


@dataclass(slots=True)
class _Counts:
    """A machine's prover process's counters (a new process starts them at 0)."""

    epoch: float | None
    done: int = 0
    failed: int = 0
    busy_s: float = 0.0
    last_done_at: float | None = None
    last_busy_s: float | None = None


class FleetProver:
    """The node's GPUs are the fleet's proving machines (module doc)."""

    def __init__(self, views: FleetViews, *, check_s: float = CHECK_S) -> None:
        if check_s <= 0:
            raise ValueError("check_s is > 0")
        self._views = views
        self.check_s = check_s
        self.proved = 0
        #: Jobs ended failed: their machine stopped holding its work.
        self.failed = 0
        self._runs: dict[int, list[_Run]] = {}
        self._counts: dict[int, _Counts] = {}
        self._sched: Scheduler | None = None
        self._done: DoneCallback | None = None

    # ------------------------------------------------------------ Prover

    def attach(self, sched: Scheduler, done: DoneCallback) -> None:
        self._sched, self._done = sched, done
        sched.every(self.check_s, self._check)

    def free(self) -> int:
        return sum(free for _, free in self._room(self._now()))

    def start(self, job: ProofJob) -> None:
        sched = self._sched
        if sched is None:
            raise RuntimeError("the prover is not attached to a node")
        now = sched.now
        room = self._room(now)
        if not room:
            raise RuntimeError("no machine of the fleet has room")
        view, _ = min(room, key=lambda vf: (-vf[1], vf[0].id))
        run = _Run(job, view.id, view.started_at, now, view.slots)
        self._runs.setdefault(view.id, []).append(run)
        seconds = view.seconds_per_proof * (SNAP_FACTOR if job.kind == "snap" else 1.0)
        sched.after(seconds, lambda: self._end(run))

    def pump(self) -> None:
        return None

    # ------------------------------------------------------------- fleet

    def _now(self) -> float:
        if self._sched is None:
            raise RuntimeError("the prover is not attached to a node")
        return self._sched.now

    def _room(self, now: float) -> list[tuple[MachineView, int]]:
        """Machines that take work now, and how many more jobs each takes."""
        out = []
        for v in self._views(now):
            if v.pulls:
                free = v.slots - len(self._running(v.id, v.started_at))
                if free > 0:
                    out.append((v, free))
        return out

    def _running(self, machine: int, epoch: float | None) -> list[_Run]:
        return [r for r in self._runs.get(machine, ()) if r.epoch == epoch]

    def _view(self, machine: int, now: float) -> MachineView | None:
        return next((v for v in self._views(now) if v.id == machine), None)

    def _end(self, run: _Run) -> None:
        if run.ended:
            return
        v = self._view(run.machine, self._now())
        holds = v is not None and v.holds and v.started_at == run.epoch
        if holds and v is not None and v.stuck:
            return  # it holds the job and finishes nothing: the check ends it when lost
        self._finish(run, ok=holds)

    def _check(self) -> None:
        """Fail the jobs of machines that no longer hold their work."""
        now = self._now()
        views = {v.id: v for v in self._views(now)}
        lost: list[_Run] = []
        for machine in sorted(self._runs):
            v = views.get(machine)
            for run in self._runs[machine]:
                if v is None or not v.holds or v.started_at != run.epoch:
                    lost.append(run)
        for run in lost:  # each end may start new jobs (the node dispatches)
            self._finish(run, ok=False)

    def _finish(self, run: _Run, *, ok: bool) -> None:
        if run.ended:
            return
        run.ended = True
        now = self._now()
        runs = self._runs[run.machine]
        runs.remove(run)
        if not runs:
            del self._runs[run.machine]
        counts = self._counts_of(run.machine, run.epoch)
        counts.busy_s += (now - run.started) / run.slots
        if ok:
            self.proved += 1
            counts.done += 1
            counts.last_done_at, counts.last_busy_s = now, counts.busy_s
        else:
            self.failed += 1
            counts.failed += 1
        if self._done is not None:
            self._done(run.job, ok)

    def _counts_of(self, machine: int, epoch: float | None) -> _Counts:
        counts = self._counts.get(machine)
        if counts is None or counts.epoch != epoch:
            counts = self._counts[machine] = _Counts(epoch)
        return counts

    # ----------------------------------------------------------- reports

    def prover_fields(self, machine: int, started_at: float | None) -> dict[str, Any]:
        """The status fields of `machine`'s prover that the node's jobs decide
        (``WorkQueue.prover_fields``'s): nothing held is an idle prover."""
        now = self._now()
        counts = self._counts.get(machine)
        if counts is None or counts.epoch != started_at:
            counts = _Counts(started_at)
        running = self._running(machine, started_at)
        busy = counts.busy_s + sum((now - r.started) / r.slots for r in running)
        return {
            "proofs_completed": counts.done,
            "proofs_in_flight": len(running),
            "work_queued": 0,
            "busy_seconds": round(busy, 3),
            "last_proof_busy_seconds": (
                round(counts.last_busy_s, 3) if counts.last_busy_s is not None else None
            ),
            "last_proof_at": counts.last_done_at,
        }

    def report(self) -> dict[str, Any]:
        """The fleet as the node sees it now: each machine's slots and jobs."""
        now = self._now()
        machines = []
        for v in self._views(now):
            counts = self._counts.get(v.id)
            same = counts is not None and counts.epoch == v.started_at
            machines.append(
                {
                    "id": v.id,
                    "takes_work": v.pulls,
                    "slots": v.slots,
                    "running": len(self._running(v.id, v.started_at)),
                    "done": counts.done if same and counts else 0,
                    "failed": counts.failed if same and counts else 0,
                    "seconds_per_proof": round(v.seconds_per_proof, 3) if v.pulls else None,
                }
            )
        return {
            "machines": machines,
            "free": sum(free for _, free in self._room(now)),
            "proved": self.proved,
            "failed": self.failed,
        }
