"""Shared bits of the benchmarks of every folder: where results go,
percentiles, the printed table, the JSON written.

The benchmarks are a package run from the repository root
(`python -m bench.perf.sim_http`), so `testkit` (the fakes and harnesses they
share with the tests; not part of the installed package) and `worker` import
as they do in the tests, with no path set by hand.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "ROOT", "percentile", "print_table", "write_json"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile (p50 of [1, 2, 3, 4] is 2); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def print_table(title: str, rows: Mapping[str, Any]) -> None:
    width = max(len(k) for k in rows)
    print(f"\n{title}\n{'-' * len(title)}")
    for key, value in rows.items():
        print(f"{key:<{width}}  {_fmt(value)}")


def write_json(name: str, data: Mapping[str, Any], path: Path | None = None) -> Path:
    """Write `data` to `path`, default bench/results/<name>-<UTC timestamp>.json."""
    if path is None:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = RESULTS / f"{name}-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path


def per_item_ms(loop: Callable[[], None], items: int, unit: str) -> dict[str, float]:
    """This thread's CPU and the wall time of `loop`, in ms per one of its
    `items` (keys `cpu_ms_per_<unit>`, `wall_ms_per_<unit>`)."""
    cpu, wall = time.thread_time(), time.perf_counter()
    loop()
    return {
        f"cpu_ms_per_{unit}": 1000 * (time.thread_time() - cpu) / items,
        f"wall_ms_per_{unit}": 1000 * (time.perf_counter() - wall) / items,
    }


def better_of(results: Mapping[str, Sequence[Mapping[str, float]]], what: str) -> dict[str, Any]:
    """Each variant's best figures over its measurements, printed; for
    benchmarks that interleave the variants so neither gets the warm cache."""
    summary: dict[str, Any] = {}
    for name, runs in results.items():
        summary[name] = best = {k: min(r[k] for r in runs) for k in runs[0]}
        print_table(f"{name}, {what} (the better of {len(runs)})", best)
    return summary
