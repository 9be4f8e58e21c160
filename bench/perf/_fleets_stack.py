"""The stack of bench/perf/fleets.py: the vast.ai simulator with a counter on
its instance list, a seeded fleet per agent, and a worker in its own process
(so its CPU and memory are its own, read from /proc), optionally sampled by
py-spy.

Nothing here is downloaded: the simulator and the fake Messages API run in
this process, the worker is `python worker.py` with the stack's environment.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import httpx
from sqlalchemy import create_engine, make_url

from bench import _common
from bench.perf._cpu import process_cpu_s
from fleet_agent.fleet.labels import create_label
from simulator import SimServer
from testkit.sim_helpers import PROVER_CREATE, PROVER_HOST

__all__ = [
    "ListCounter",
    "Profiler",
    "WorkerGroup",
    "WorkerProc",
    "count_lists",
    "fresh_store",
    "seed_fleets",
]

_PAGE = os.sysconf("SC_PAGE_SIZE")
_INSTANCE_LIST = "/api/v1/instances"
#: What worker.py logs once it polls its task queue (its store created).
_READY = "worker on task queue"


class ListCounter:
    """Times of the simulator's instance-list requests (every page counts)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.times.append(time.monotonic())

    def between(self, start: float, end: float) -> int:
        with self._lock:
            return sum(1 for t in self.times if start <= t < end)


def count_lists(sim: SimServer) -> ListCounter:
    """Count every ``GET /api/v1/instances/`` the simulator answers, by
    wrapping its request handler (a bench-only hook on a private attribute)."""
    counter = ListCounter()
    api = sim._api
    inner = api.handle

    def handle(method: str, target: str, *args: Any, **kwargs: Any) -> Any:
        if method == "GET" and target.startswith(_INSTANCE_LIST):
            counter.add()
        return inner(method, target, *args, **kwargs)

    api.handle = handle  # type: ignore[method-assign]
    return counter


def seed_fleets(sim: SimServer, agents: list[str], per_agent: int) -> int:
    """Rent `per_agent` machines for every agent, labelled as its own creates
    are, with the simulator's rate limits off for the set-up (switched back on
    by the caller). Returns the machines rented."""
    if per_agent <= 0:
        return 0
    headers = {"Authorization": f"Bearer {sim.api_key}"}
    with httpx.Client(base_url=sim.url, headers=headers, timeout=30) as c:
        wanted = len(agents) * per_agent
        body = {**PROVER_HOST, "order": [["dph_total", "asc"]], "limit": wanted * 2}
        resp = c.post("/api/v0/bundles/", json=body)
        resp.raise_for_status()
        offers = [int(o["id"]) for o in resp.json()["offers"]]
        rented = 0
        for agent in agents:
            for i in range(per_agent):
                while offers:
                    label = create_label(agent, 0, f"bench-seed-{i}")
                    body = {**PROVER_CREATE, "label": label}
                    r = c.put(f"/api/v0/asks/{offers.pop(0)}/", json=body)
                    if r.status_code == 200:
                        rented += 1
                        break
        if rented < wanted:
            raise RuntimeError(f"rented {rented} of {wanted} machines: too few offers")
        return rented


class WorkerProc:
    """`python worker.py` in its own process group; CPU ticks and RSS from /proc."""

    def __init__(self, log: Path, env: dict[str, str]) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log: IO[bytes] = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(_common.ROOT / "worker.py")],
            cwd=_common.ROOT,
            env={**os.environ, **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def cpu_seconds(self) -> float:
        """User + system CPU time of the worker so far."""
        return process_cpu_s(self.proc.pid)

    def runqueue_seconds(self) -> float:
        """Time the worker's threads spent runnable but waiting for a CPU
        (/proc/PID/task/*/schedstat, second field): CPU starvation by other
        processes, which a low CPU figure alone does not show."""
        total = 0
        for stat in Path(f"/proc/{self.proc.pid}/task").glob("*/schedstat"):
            try:
                total += int(stat.read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue  # the thread ended meanwhile
        return total / 1e9

    def rss_mb(self) -> float:
        """Resident memory now."""
        pages = int(Path(f"/proc/{self.proc.pid}/statm").read_text().split()[1])
        return pages * _PAGE / 1e6

    def peak_rss_mb(self) -> float:
        """The kernel's high-water mark of resident memory since the start
        (VmHWM in /proc/PID/status): no peak between two samples is missed."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
        raise RuntimeError("no VmHWM in /proc/PID/status")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


class Profiler:
    """`py-spy record` on a running process, its samples written as folded
    stacks (one line a stack, its count last) for `bench/perf/fleets.py
    --py-spy`. py-spy is not a dependency of the project: the caller gives
    its path. Every thread is sampled (workflow tasks run in a thread pool,
    activities on the event loop); idle threads are left out."""

    def __init__(self, py_spy: Path, pid: int, out: Path, rate: int = 50) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.proc = subprocess.Popen(
            [
                *(str(py_spy), "record", "--pid", str(pid), "--rate", str(rate)),
                *("--format", "raw", "--output", str(out), "--nonblocking"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    def stop(self) -> None:
        """SIGINT (py-spy writes its file then), SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


class WorkerGroup:
    """K workers on one task queue, read as one: CPU, run-queue time and
    memory summed over the processes (the peak RSS is the sum of each
    one's peak, an upper bound); `proc` is the first one's (for py-spy)."""

    def __init__(self, logs: list[Path], env: dict[str, str]) -> None:
        # The first creates the store; the others start once it serves.
        first = WorkerProc(logs[0], env)
        deadline = time.monotonic() + 60
        while len(logs) > 1 and _READY not in logs[0].read_text(errors="replace"):
            if time.monotonic() > deadline or not first.alive():
                first.close()
                raise RuntimeError(f"the first worker did not start: see {logs[0]}")
            time.sleep(0.2)
        self.workers = [first, *(WorkerProc(log, env) for log in logs[1:])]
        self.proc = first.proc

    def cpu_seconds(self) -> float:
        return sum(w.cpu_seconds() for w in self.workers)

    def runqueue_seconds(self) -> float:
        return sum(w.runqueue_seconds() for w in self.workers)

    def rss_mb(self) -> float:
        return sum(w.rss_mb() for w in self.workers)

    def peak_rss_mb(self) -> float:
        return sum(w.peak_rss_mb() for w in self.workers)

    def alive(self) -> bool:
        return all(w.alive() for w in self.workers)

    def close(self) -> None:
        for w in self.workers:
            w.close()


@contextmanager
def fresh_store(folder: Path, postgres: str | None) -> Iterator[str]:
    """The URL of an empty store for one measurement: a SQLite file in
    `folder`, or a new database on the PostgreSQL server of `postgres` (its
    database part is only where to connect to create it), dropped after."""
    if postgres is None:
        yield f"sqlite:///{folder / 'fleet.db'}"
        return
    server = make_url(postgres)
    if server.drivername == "postgresql":
        server = server.set(drivername="postgresql+psycopg")
    name = f"fleets_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        try:
            yield server.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()
