"""Where the machine's CPU went over a benchmark's window, from /proc: each
process of the stack (the worker, the Temporal dev server, the benchmark with
its in-process simulator), whatever else ran, and the time the hypervisor
took (steal). A latency that waits for a core is only explained by the whole
machine's figures, not by the worker's alone."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CpuWindow", "descendants_named", "process_cpu_s"]

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (OSError once it is gone:
    a window's figure without it would be wrong, not smaller)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(c) for c in task.read_text().split()]
        except OSError:
            continue
    return out


def descendants_named(name: str, root: int | None = None) -> list[int]:
    """Processes under `root` (this one) whose command is `name`."""
    found: list[int] = []
    todo = _children(os.getpid() if root is None else root)
    while todo:
        pid = todo.pop()
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm == name:
            found.append(pid)
        todo += _children(pid)
    return found


def _machine_ticks() -> tuple[int, int, int]:
    """(busy, steal, all) ticks of every CPU since boot (/proc/stat)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq
    return busy, steal, busy + idle + iowait + steal


@dataclass
class CpuWindow:
    """CPU seconds of named groups of processes, from its making to `stop`."""

    groups: Mapping[str, Sequence[int]]

    def __post_init__(self) -> None:
        self._t0 = time.monotonic()
        self._m0 = _machine_ticks()
        self._p0 = {g: sum(map(process_cpu_s, pids)) for g, pids in self.groups.items()}

    def stop(self) -> dict[str, float | dict[str, float]]:
        """The window's figures, in cores (CPU seconds a second of the window)."""
        window = time.monotonic() - self._t0
        busy1, steal1, all1 = _machine_ticks()
        busy0, steal0, all0 = self._m0
        per_group = {
            g: (sum(map(process_cpu_s, pids)) - self._p0[g]) / window
            for g, pids in self.groups.items()
        }
        busy = (busy1 - busy0) / _CLK_TCK / window
        per_group["other"] = max(0.0, busy - sum(per_group.values()))
        return {
            "cpus": float(os.cpu_count() or 1),
            "machine_busy_cores": busy,
            # The hypervisor's share of all CPU time: a busy host slows the
            # same code here (the "machine speed" that varies within an hour).
            "machine_steal_pct": 100 * (steal1 - steal0) / max(1, all1 - all0),
            "cores_by_process": per_group,
        }
