"""bench/perf/fleets.py's printout: one Markdown line per N, and each N's
figures flattened for its own table."""

from __future__ import annotations

from typing import Any

__all__ = ["COLUMNS", "flat", "print_rows"]

COLUMNS: list[tuple[str, str]] = [
    ("agents", "fleets"),
    ("s", "seconds"),
    ("load", "load_1min_end"),
    ("answered", "answered"),
    ("RSS peak MB", "worker_rss_peak_mb"),
    ("RSS end MB", "worker_rss_end_mb"),
    ("CPU %", "worker_cpu_pct_of_one_core"),
    ("wait CPU %", "worker_waiting_for_cpu_pct"),
    ("machine cores busy", "machine_cpu.machine_busy_cores"),
    ("dev server cores", "machine_cpu.cores_by_process.temporal_dev_server"),
    ("steal %", "machine_cpu.machine_steal_pct"),
    ("P0 p50", "p0_to_run_start_s.p50"),
    ("P0 p95", "p0_to_run_start_s.p95"),
    ("P0 max", "p0_to_run_start_s.max"),
    ("Δp95 vs 1", "p0_p95_vs_one_agent_s"),
    ("answer p50", "p0_to_answer_s.p50"),
    ("answer p95", "p0_to_answer_s.p95"),
    ("answer max", "p0_to_answer_s.max"),
    ("wft wait p50", "wf_task_schedule_to_start_s.p50"),
    ("wft wait p95", "wf_task_schedule_to_start_s.p95"),
    ("wft run p50", "wf_task_start_to_complete_s.p50"),
    ("tasks/s", "wf_tasks_per_s"),
    ("CPU ms/task", "worker_cpu_ms_per_wf_task"),
]


def _cell(row: dict[str, Any], key: str) -> str:
    if key == "answered":
        return f"{row['messages_answered']}/{row['messages_sent']}"
    value: Any = row
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def print_rows(rows: list[dict[str, Any]]) -> None:
    """One line per N, as a Markdown table."""
    cells = [[_cell(r, key) for _, key in COLUMNS] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (h, _) in enumerate(COLUMNS)]
    print("\n| " + " | ".join(h.ljust(w) for (h, _), w in zip(COLUMNS, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for line in cells:
        print("| " + " | ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) + " |")


def flat(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested figures as `key.sub` lines, for the per-N printout."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict):
            out |= flat(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out
