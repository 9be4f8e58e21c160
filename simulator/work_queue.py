"""The proving node's queue: work items with deadlines, pulled by provers.

`WorkQueue` advances one simulated minute at a time (`tick`): the minute's
arrivals (simulator/demand.py) join the queue; every prover that is proving
and takes work pulls the item with the earliest deadline whenever one of its
slots is free, and holds it for its proof time. A prover that stops holding
work (destroyed, dead, stopped, rebooted, failed, frozen) gives its items
back to the queue at the minute's start. Machines are looked at once per
minute, so a run is the same however often the clock is stepped.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .demand import DemandConfig

__all__ = ["MAX_DEADLINES", "Item", "MachineView", "WorkQueue"]

#: At most this many deadlines in the ``GET /demand`` answer.
MAX_DEADLINES = 1000
_NEVER = math.inf


class MachineView(NamedTuple):
    """What the queue needs to know of one machine at a minute's start."""

    id: int
    holds: bool  # its prover is in the proving phase (stuck or not): it keeps its work
    pulls: bool  # it takes new work: proving, not stuck, not draining
    stuck: bool  # it holds its work and finishes none
    slots: int  # proofs it runs at once
    seconds_per_proof: float  # per slot
    started_at: float | None  # its prover process (a new one starts counters at 0)


@dataclass(slots=True)
class Item:
    id: int
    arrival: float
    deadline: float


@dataclass(slots=True)
class _Slot:
    item: Item | None = None
    finish: float = _NEVER
    since: float = 0.0  # busy time is accounted up to here


@dataclass(slots=True)
class _Prover:
    started_at: float | None
    seconds_per_proof: float
    slots: list[_Slot]
    done: int = 0
    busy_s: float = 0.0
    last_done_at: float | None = None
    last_busy_s: float | None = None

    def held(self) -> int:
        return sum(1 for s in self.slots if s.item is not None)


@dataclass(slots=True)
class WorkQueue:
    """The queue and its counters, from minute `next_minute` on."""

    config: DemandConfig
    seed: int
    next_minute: int
    _queue: list[tuple[float, int, Item]] = field(default_factory=list)
    _provers: dict[int, _Prover] = field(default_factory=dict)
    _next_id: int = 1
    counters: dict[str, float] = field(
        default_factory=lambda: (
            dict.fromkeys(("arrived", "done", "done_on_time", "late", "expired", "returned"), 0)
            | {"idle_machine_seconds": 0.0}
        )
    )

    # ------------------------------------------------------------ ticks

    def due(self, now: float) -> range:
        """Minutes that ended by `now` and are not yet processed."""
        return range(self.next_minute, int(now // 60.0))

    def tick(self, minute: int, machines: list[MachineView]) -> None:
        """Process sim minute [60 x `minute`, + 60) with `machines` as they
        stood at its start."""
        start, end = minute * 60.0, minute * 60.0 + 60.0
        self.next_minute = minute + 1
        views = {v.id: v for v in machines}
        self._reconcile(views, start)
        expire_s = self.config.expire_minutes * 60.0
        free: list[tuple[int, int]] = []  # (machine, slot) free to pull
        finishing: list[tuple[float, int, int]] = []  # (finish, machine, slot)
        empty_since: dict[int, float] = {}
        for mid, p in self._provers.items():
            v = views[mid]
            for i, slot in enumerate(p.slots):
                if slot.item is None and v.pulls:
                    free.append((mid, i))
                elif slot.item is not None and v.stuck:
                    slot.finish = _NEVER
                elif slot.item is not None:
                    finishing.append((slot.finish, mid, i))
            if v.pulls and p.held() == 0:
                empty_since[mid] = start
        heapq.heapify(free)
        heapq.heapify(finishing)

        def pull(t: float) -> None:
            while free and self._queue:
                item = heapq.heappop(self._queue)[2]
                if expire_s > 0 and item.arrival + expire_s <= t:
                    self.counters["expired"] += 1
                    continue
                mid, i = heapq.heappop(free)
                p = self._provers[mid]
                p.slots[i] = _Slot(item, t + p.seconds_per_proof, t)
                heapq.heappush(finishing, (p.slots[i].finish, mid, i))
                if mid in empty_since:
                    self.counters["idle_machine_seconds"] += t - empty_since.pop(mid)

        arrivals = self.config.arrivals(minute, self.seed)
        deadline_s = self.config.deadline_minutes * 60.0
        pull(start)
        k = 0
        while True:
            next_arrival = arrivals[k] if k < len(arrivals) else _NEVER
            next_finish = finishing[0][0] if finishing else _NEVER
            if min(next_arrival, next_finish) >= end:
                break
            if next_finish <= next_arrival:
                t, mid, i = heapq.heappop(finishing)
                self._finish(mid, i, t)
                if views[mid].pulls:
                    heapq.heappush(free, (mid, i))
                    if self._provers[mid].held() == 0:
                        empty_since[mid] = t
                pull(t)
            else:
                item = Item(self._next_id, next_arrival, next_arrival + deadline_s)
                self._next_id += 1
                k += 1
                self.counters["arrived"] += 1
                heapq.heappush(self._queue, (item.deadline, item.id, item))
                pull(next_arrival)
        # Earliest deadline first is earliest arrival first: expired items are on top.
        while expire_s > 0 and self._queue and self._queue[0][2].arrival + expire_s <= end:
            heapq.heappop(self._queue)
            self.counters["expired"] += 1
        for since in empty_since.values():
            self.counters["idle_machine_seconds"] += end - since
        for p in self._provers.values():
            for slot in p.slots:
                if slot.item is not None:
                    p.busy_s += (end - slot.since) / len(p.slots)
                    slot.since = end

    def _reconcile(self, views: dict[int, MachineView], t: float) -> None:
        """Provers gone, restarted or no longer proving give their work back."""
        for mid, p in list(self._provers.items()):
            v = views.get(mid)
            gone = v is None or v.started_at != p.started_at
            if gone or v is None or not v.holds:
                for i, slot in enumerate(p.slots):
                    if slot.item is not None:
                        self._requeue(slot.item)
                        p.busy_s += (t - slot.since) / len(p.slots)
                        p.slots[i] = _Slot()
            if gone:
                del self._provers[mid]
        for v in views.values():
            if v.holds and v.id not in self._provers and v.slots > 0:
                slots = [_Slot() for _ in range(v.slots)]
                self._provers[v.id] = _Prover(v.started_at, v.seconds_per_proof, slots)

    def _requeue(self, item: Item) -> None:
        self.counters["returned"] += 1
        heapq.heappush(self._queue, (item.deadline, item.id, item))

    def _finish(self, mid: int, i: int, t: float) -> None:
        p = self._provers[mid]
        item = p.slots[i].item
        assert item is not None
        p.busy_s += (t - p.slots[i].since) / len(p.slots)
        p.slots[i] = _Slot()
        p.done += 1
        p.last_done_at, p.last_busy_s = t, p.busy_s
        self.counters["done"] += 1
        self.counters["done_on_time" if t <= item.deadline else "late"] += 1

    # ---------------------------------------------------------- reports

    def holding(self, machine_id: int) -> list[Item]:
        """The items `machine_id`'s prover holds now."""
        p = self._provers.get(machine_id)
        return [s.item for s in p.slots if s.item is not None] if p else []

    def in_flight(self) -> int:
        return sum(p.held() for p in self._provers.values())

    def deadlines(self) -> list[float]:
        """Deadlines of queued and in-flight items, soonest first (at most `MAX_DEADLINES`)."""
        held = (s.item.deadline for p in self._provers.values() for s in p.slots if s.item)
        queued = (d for d, _, _ in self._queue)
        return heapq.nsmallest(MAX_DEADLINES, [*held, *queued])

    def report(self) -> dict[str, Any]:
        """The counters, the queue and the work in flight now."""
        out: dict[str, Any] = {k: v for k, v in self.counters.items()}
        out["idle_machine_seconds"] = round(self.counters["idle_machine_seconds"], 3)
        for name in ("arrived", "done", "done_on_time", "late", "expired", "returned"):
            out[name] = int(self.counters[name])
        out["queued"] = len(self._queue)
        out["in_flight"] = self.in_flight()
        out["processed_until"] = self.next_minute * 60.0
        return out

    def prover_fields(self, machine_id: int, started_at: float | None) -> dict[str, Any]:
        """The status fields of `machine_id`'s prover that the queue decides:
        nothing held and nothing queued is an idle prover."""
        p = self._provers.get(machine_id)
        if p is None or p.started_at != started_at:
            p = _Prover(started_at, 0.0, [])
        return {
            "proofs_completed": p.done,
            "proofs_in_flight": p.held(),
            "work_queued": 0,
            "busy_seconds": round(p.busy_s, 3),
            "last_proof_busy_seconds": (
                round(p.last_busy_s, 3) if p.last_busy_s is not None else None
            ),
            "last_proof_at": p.last_done_at,
        }
