"""What bench/perf/router_faults_agent.py sees of the stack while it runs.

`Watch` samples the simulator's truth (``GET /_sim/state``: each instance's
row and its cuzk) and the stack's store (the router's members and witness,
the agent's failed hosts: bench/perf/_up_stack.py `store_reads`) and keeps a
`Machine` per instance: when it was rented, stopped serving, left the
listing; its member's expected rate; each witness phase and when it began;
its first proof. `Clocks` puts every time on the simulator's clock: the
wall clock's (the worker's runs and bans, the Curio node's records) and the
router's reporting clock (its witness), which runs at the same speed from
the router's own start. `agent_actions` reads the agent's runs and fleet
tool calls from the store (fleet_agent/store/run_reads.py, the journal's
table): which run destroyed a machine, what woke it, and what it rented.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import select

from bench.perf._up_stack import StoreRead, UpStack, sim_get, store_reads
from fleet_agent.cuzk.witness import MachineWitness
from fleet_agent.store import Store
from fleet_agent.store.tables import ToolCallRow, table_of

__all__ = ["AgentAction", "Clocks", "Machine", "Watch", "agent_actions"]

#: How often the bench samples, real seconds.
SAMPLE_S = 0.5
_RENTED = re.compile(r"Rented instance (\d+)")


@dataclass
class Clocks:
    """Real (wall) seconds to the simulator's clock, and the router's reporting
    clock to the simulator's: both run `speed` times real time from their own
    starts, so they differ by a constant (measured at every witness read)."""

    speed: float
    anchor: tuple[float, float] | None = None  # (wall, sim)
    offsets: list[float] = field(default_factory=list)  # report - sim

    def sim_at(self, wall: float) -> float:
        """The simulator's clock at wall-clock `wall` (epoch seconds)."""
        assert self.anchor is not None
        w, s = self.anchor
        return s + (wall - w) * self.speed

    def sim_of(self, at: datetime) -> float:
        """A wall-clock time (the worker's, the store's; naive is UTC) on the simulator's."""
        return self.sim_at((at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp())

    def from_report(self, at: datetime) -> float:
        """A witness time (the router's reporting clock) on the simulator's."""
        offset = statistics.median(self.offsets) if self.offsets else 0.0
        return at.timestamp() - offset

    @property
    def offset(self) -> float | None:
        return statistics.median(self.offsets) if self.offsets else None


@dataclass
class Machine:
    """One instance over the run, as the simulator and the store showed it
    (times on the simulator's clock)."""

    id: int
    gpu: str
    gpus: int
    machine_id: int | None
    host_id: int | None
    created: float
    status: str = ""
    destroyed: float | None = None
    #: When it left the simulator's listing (the ideal scenario lists nothing
    #: destroyed), a sample's precision.
    vanished: float | None = None
    #: When its cuzk stopped serving or its row stopped running, after it had
    #: proved (a sample's precision).
    down: float | None = None
    rate: float | None = None
    witness: MachineWitness | None = None
    #: (since, phase) of each witness phase seen.
    phases: list[tuple[float, str]] = field(default_factory=list)
    first_done: float | None = None
    #: The first witness that showed a proof showed exactly one (else the first
    #: proof was at or before `first_done`).
    first_done_exact: bool = True
    max_in_flight: int = 0
    member_seen: bool = False
    banned: dict[str, Any] | None = None
    role: str = ""
    fault_at: float | None = None

    @property
    def interval_s(self) -> float | None:
        """Expected seconds between its proofs (all GPUs): 3600 / the member's rate."""
        return 3600.0 / self.rate if self.rate else None

    @property
    def gone(self) -> bool:
        return self.destroyed is not None or self.vanished is not None

    def phase_since(self, phases: set[str], after: float) -> float | None:
        """When the first witness phase of `phases` began, from `after` on."""
        return next((t for t, p in self.phases if p in phases and t >= after - 1.0), None)


class Watch:
    """Samples the simulator and the store; keeps a `Machine` per instance."""

    def __init__(self, stack: UpStack, client: httpx.AsyncClient, speed: float) -> None:
        self.stack = stack
        self.client = client
        self.clocks = Clocks(speed)
        self.store = Store(stack.store_url)
        self.machines: dict[int, Machine] = {}
        self.counters: dict[str, Any] = {}
        self.now = 0.0  # the simulator's clock at the last sample
        self.samples = 0

    async def sample(self) -> None:
        """Read the simulator's state, then the store."""
        w0 = time.time()
        state = await sim_get(self.client, self.stack.sim_url, "/_sim/state")
        w1 = time.time()
        self.clocks.anchor = ((w0 + w1) / 2, float(state["now"]))
        previous, self.now = self.now, float(state["now"])
        self.counters = dict(state.get("counters") or {})
        listed = set()
        for row in state["instances"]:
            listed.add(row["id"])
            m = self.machines.get(row["id"])
            if m is None:
                m = self.machines[row["id"]] = Machine(
                    id=row["id"],
                    gpu=str(row.get("gpu_name")),
                    gpus=int(row.get("num_gpus") or 1),
                    machine_id=row.get("machine_id"),
                    host_id=row.get("host_id"),
                    created=float(row["start_date"]),
                )
            m.status = str(row.get("actual_status"))
            if row.get("destroyed_at") is not None:
                m.destroyed = float(row["destroyed_at"])
            proved = m.witness is not None and m.witness.done > 0
            stopped = m.status != "running" or not (row.get("cuzk") or {}).get("serving")
            if m.down is None and proved and stopped:
                m.down = (previous + self.now) / 2
        for m in self.machines.values():
            if m.id not in listed and m.vanished is None:
                m.vanished = (previous + self.now) / 2
        self._store(await asyncio.to_thread(store_reads, self.store, self.stack.agent_id))
        self.samples += 1

    def _store(self, read: StoreRead) -> None:
        witnesses, queue, written = read.witness
        if queue is not None and written is not None:
            self.clocks.offsets.append(
                queue.at.timestamp() - self.clocks.sim_at(written.timestamp())
            )
            del self.clocks.offsets[:-60]
        for spec in read.members:
            m = self.machines.get(spec.instance_id)
            if m is not None:
                m.member_seen = True
                m.rate = spec.expected_proofs_per_hour or m.rate
        for iid, w in witnesses.items():
            m = self.machines.get(iid)
            if m is None:
                continue
            m.witness = w
            m.max_in_flight = max(m.max_in_flight, w.in_flight)
            if not m.phases or m.phases[-1][1] != w.phase:
                m.phases.append((self.clocks.from_report(w.since), w.phase))
            if m.first_done is None and w.done and w.last_done_at is not None:
                m.first_done = self.clocks.from_report(w.last_done_at)
                m.first_done_exact = w.done == 1
        by_machine = {h.machine_id: h for h in read.banned}
        for m in self.machines.values():
            h = by_machine.get(m.machine_id or -1)
            if h is not None and m.banned is None:
                m.banned = {
                    "reason": h.reason,
                    "at": self.clocks.sim_of(h.failed_at),
                    "host_id": h.host_id,
                }

    def live(self) -> list[Machine]:
        """Instances listed now and neither destroyed nor exited."""
        return [m for m in self.machines.values() if not m.gone and m.status != "exited"]

    def proving(self) -> list[Machine]:
        """Live instances whose witness serves and has a proof done."""
        return [
            m
            for m in self.live()
            if m.witness is not None and m.witness.phase == "serving" and m.witness.done > 0
        ]

    def serving_rate(self) -> float:
        """Proofs/h the serving members are expected to prove (their members' rates)."""
        return sum(
            m.rate or 0.0
            for m in self.live()
            if m.witness is not None and m.witness.phase == "serving"
        )

    async def until(
        self,
        done: Callable[[], bool],
        within_s: float,
        what: str,
        progress: Callable[[], str] | None = None,
    ) -> bool:
        """Sample until `done()` (True) or `within_s` real seconds (False);
        `progress()` printed every 30 s."""
        t0 = time.monotonic()
        said = t0
        while True:
            await self.sample()
            if done():
                return True
            now = time.monotonic()
            if now - t0 > within_s:
                return False
            if progress is not None and now - said >= 30:
                said = now
                print(f"[{now - t0:4.0f} s] {what}: {progress()}", flush=True)
            await asyncio.sleep(SAMPLE_S)

    def close(self) -> None:
        self.store.dispose()


@dataclass(frozen=True)
class AgentAction:
    """The agent's run that destroyed a machine (times on the wall clock)."""

    run: int
    #: When the monitor's signal about the machine reached the agent (the
    #: first trigger of the run naming it), None if none did.
    signalled: datetime | None
    run_started: datetime
    destroy_called: datetime
    rented: list[int]


def agent_actions(store: Store, agent_id: str) -> dict[int, AgentAction]:
    """Each machine the agent destroyed: the run, its trigger about the
    machine, the destroy call's start and the machines that run rented."""
    table = table_of(ToolCallRow)
    with store.engine.connect() as conn:
        calls = conn.execute(
            select(table.c.run, table.c.name, table.c.input_json, table.c.result_json)
            .add_columns(table.c.started_at)
            .where(table.c.agent_id == agent_id)
            .order_by(table.c.id)
        ).all()
    runs = {r.run: r for r in store.run_reads.list_runs(agent_id, limit=10_000) if r.attempt == 1}
    rented: dict[int, list[int]] = {}
    for c in calls:
        if c.name == "create_instance" and (m := _RENTED.search(c.result_json or "")):
            rented.setdefault(c.run, []).append(int(m[1]))
    out: dict[int, AgentAction] = {}
    for c in calls:
        if c.name != "destroy_instance" or c.run not in runs:
            continue
        iid = _instance_of(c.input_json)
        if iid is None or iid in out:
            continue
        record = runs[c.run]
        signalled = next(
            (t.received_at for t in record.triggers if t.instance_id == str(iid)), None
        )
        out[iid] = AgentAction(
            run=c.run,
            signalled=signalled,
            run_started=record.started_at,
            destroy_called=c.started_at,
            rented=rented.get(c.run, []),
        )
    return out


def _instance_of(input_json: str) -> int | None:
    m = re.search(r'"instance_id":\s*(\d+)', input_json or "")
    return int(m[1]) if m else None
