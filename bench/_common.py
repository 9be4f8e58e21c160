"""Shared bits of the benchmarks: import path, percentiles, the printed table.

Importing this module puts the repository root on `sys.path`, so a benchmark
run as `python bench/<name>.py` can import `tests.fakes` (the test doubles are
not part of the installed package).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "ROOT", "percentile", "print_table", "write_json"]

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


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
