"""bench/llm_cost/context_growth.py's figures: the timing of `load_context` and of
the history read (`LoadTimes`), the report of a finished session (every
block of runs, the extrapolation to 100,000 runs, the issue's target checks)
and the table row printed every `--every` runs."""

from __future__ import annotations

import argparse
import statistics
import time
from typing import TYPE_CHECKING, Any

import activities.runlog
from activities.runlog import RunLogActivities
from bench.llm_cost._llm_runs import HEARTBEAT_S
from bench.llm_cost.prompt_cache import _share, _summariser, _usage, windows
from fleet_agent.llm.model_table import DEFAULT_MODEL, cost_usd
from fleet_agent.models import LoadContextRequest, TokenUsage
from fleet_agent.store import Store
from testkit.fakes import Request

if TYPE_CHECKING:
    from bench.llm_cost.context_growth import Sampler

HEARTBEATS_PER_DAY = 24 * 3600 // HEARTBEAT_S  # 288
EXTRAPOLATE_TO = 100_000
RUN_HISTORY_LIMIT = 20_000
TARGET_FLAT = 0.10
TARGET_CACHED = 0.70
TARGET_LOAD = 0.20
TARGET_SAVING = 0.90
LOAD_SPAN = 11  # runs whose median load_context time stands for "run 10" and "the last run"


class LoadTimes:
    """Wall time of each run's load_context activity and of the history read it
    does (`prompt_history`: the summary and the runs after it), by run."""

    def __init__(self) -> None:
        self.activity: dict[int, float] = {}
        self.read: dict[int, float] = {}

    def install(self) -> None:
        inner_load = RunLogActivities._load_context
        inner_read = vars(activities.runlog)["prompt_history"]
        times = self

        async def timed_load(self: RunLogActivities, req: LoadContextRequest) -> Any:
            t0 = time.perf_counter()
            try:
                return await inner_load(self, req)
            finally:
                times.activity[req.run_input.run] = time.perf_counter() - t0

        def timed_read(store: Store, agent_id: str, session: int, run: int, budget: int) -> Any:
            t0 = time.perf_counter()
            try:
                return inner_read(store, agent_id, session, run, budget)
            finally:
                times.read[run] = time.perf_counter() - t0

        RunLogActivities._load_context = timed_load  # type: ignore[method-assign]
        vars(activities.runlog)["prompt_history"] = timed_read

    @staticmethod
    def median(times: dict[int, float], around: int, last: int) -> float | None:
        lo = max(1, min(around - LOAD_SPAN // 2, last - LOAD_SPAN + 1))
        found = [times[r] for r in range(lo, lo + LOAD_SPAN) if r in times]
        return statistics.median(found) if found else None


def report(
    args: argparse.Namespace, s: Sampler, requests: list[Request], wall_s: float
) -> dict[str, Any]:
    rows = s.rows
    first, last = rows[0], rows[-1]
    rounds = [r for r in requests if not _summariser(r)]
    consecutive = sum((w.rounds + w.starts for w in windows(rounds, args.every)), TokenUsage())
    cached = _share(consecutive) or 0.0
    total = sum((_usage(r) for r in requests), TokenUsage())
    ours_usd = cost_usd(total, s.info)
    naive_usd = sum(r["naive_usd_per_run"] * _span(r["runs"]) for r in rows)
    overhead = s._overhead(rounds)
    # Whole-request bound: system and tools, the history's budget (summary
    # included) and the current run's share, as large (fleet_agent/llm/request_fit.py).
    request_bound = overhead + 2 * args.budget

    # Extrapolation to 100,000 runs. Ours: flat once the budget has filled,
    # every run after the last costs what a run of the last block did. The
    # naive agent: its prompt grows by what each run stores, at the rate of
    # the measured runs.
    n = args.runs
    per_run_growth = s.naive_messages[n] / n
    naive_at_100k = overhead + s.naive_messages[n] + per_run_growth * (EXTRAPOLATE_TO - n)
    requests_per_run = len(rounds) / n
    ours_100k_usd = ours_usd + last["usd_per_run"] * (EXTRAPOLATE_TO - n)
    # Naive input grows linearly: the mean prompt of runs n+1..100k is the
    # mean of its ends; priced uncached, outputs as ours.
    in_price = s.info.input / 1e6
    mean_naive_after = (overhead + s.naive_messages[n] + naive_at_100k) / 2
    naive_100k_usd = naive_usd + (EXTRAPOLATE_TO - n) * (
        requests_per_run * mean_naive_after * in_price
        + (
            last["naive_usd_per_run"]
            - last["naive_tokens_per_request"] * requests_per_run * in_price
        )
    )
    base = next((r for r in rows if r["run"] >= 100), rows[0])
    load10 = LoadTimes.median(s.loads.activity, 10, n)
    load_last = LoadTimes.median(s.loads.activity, n, n)
    read10 = LoadTimes.median(s.loads.read, 10, n)
    read_last = LoadTimes.median(s.loads.read, n, n)
    tool_sizes = [r["tool_run_history_bytes"] for r in rows if r["tool_run_history_bytes"]]
    # The target: every later row within 10 % of the row of run 100.
    later = [r["prompt_tokens_per_request"] for r in rows if r["run"] > base["run"]] or [
        base["prompt_tokens_per_request"]
    ]
    low, high = (v / base["prompt_tokens_per_request"] - 1 for v in (min(later), max(later)))
    # The plateau (docs/DECISIONS.md, "The prompt's plateau"): the rows after
    # the history budget first filled (the first summary) within 10 % of
    # each other.
    filled = s.budget_filled_at or n + 1
    plateau = [r["prompt_tokens_per_request"] for r in rows if r["run"] - s.args.every >= filled]
    spread = max(plateau) / min(plateau) - 1 if plateau else None
    checks = {
        "prompt_tokens_flat": {
            "value": f"rows after runs {base['runs']}: {min(later)}–{max(later)} a request vs "
            f"{base['prompt_tokens_per_request']} ({100 * low:+.1f} % / {100 * high:+.1f} %)",
            "met": max(abs(low), abs(high)) <= TARGET_FLAT,
        },
        "prompt_tokens_plateau": {
            "value": "budget not filled"
            if spread is None
            else f"from run {filled} (the first summary): {min(plateau)}–{max(plateau)} "
            f"a request ({100 * spread:.1f} % apart)",
            "met": spread is not None and spread <= TARGET_FLAT,
        },
        "prompt_tokens_under_budget": {
            "value": f"max {max(r['max_prompt_tokens'] for r in rows)} ≤ {request_bound} "
            f"(system+tools {overhead} + 2 × budget {args.budget})",
            "met": max(r["max_prompt_tokens"] for r in rows) <= request_bound,
        },
        "cached_share": {
            "value": f"{100 * cached:.1f} % of consecutive rounds' and runs' input read",
            "met": cached >= TARGET_CACHED,
        },
        "run_history_flat": {
            "value": f"two-tool-call run: {tool_sizes[0]} B (run {first['tool_run']}) → "
            f"{tool_sizes[-1]} B (run {last['tool_run']})",
            "met": abs(tool_sizes[-1] - tool_sizes[0]) < 1_000,
        },
        "run_history_under_20kb": {
            "value": f"max {max(tool_sizes)} B for a run with two tool calls",
            "met": max(tool_sizes) < RUN_HISTORY_LIMIT,
        },
        "load_context_flat": {
            "value": f"median of {LOAD_SPAN} runs: {1000 * (load_last or 0):.1f} ms at the "
            f"last run vs {1000 * (load10 or 0):.1f} ms at run 10 (history read "
            f"{1000 * (read_last or 0):.2f} vs {1000 * (read10 or 0):.2f} ms)",
            "met": bool(load10 and load_last and load_last <= load10 * (1 + TARGET_LOAD)),
        },
        "cost_reduction": {
            "value": f"${last['usd_per_run']:.4f} vs naive ${last['naive_usd_per_run']:.4f} a run "
            f"at runs {last['runs']} "
            f"({100 * (1 - last['usd_per_run'] / last['naive_usd_per_run']):.1f} % less)",
            "met": last["usd_per_run"] <= (1 - TARGET_SAVING) * last["naive_usd_per_run"],
        },
    }
    return {
        "rows": rows,
        "checks": checks,
        "runs_per_day": s.runs_per_day,
        "requests": len(rounds),
        "summariser_requests": len(requests) - len(rounds),
        "usd_total": ours_usd,
        "output_tokens": total.output_tokens,
        "thinking_tokens": total.thinking_tokens,
        "thinking_tokens_per_request": total.thinking_tokens / max(len(requests), 1),
        "usd_thinking": total.thinking_tokens * s.info.output / 1e6,
        "naive_usd_total": naive_usd,
        "cached_share_consecutive": cached,
        "agent_continued_as_new": s.continued_as_new,
        "load_context_ms_run10_median": 1000 * (load10 or 0),
        "load_context_ms_last_median": 1000 * (load_last or 0),
        "history_read_ms_run10_median": 1000 * (read10 or 0),
        "history_read_ms_last_median": 1000 * (read_last or 0),
        "extrapolation": {
            "runs": EXTRAPOLATE_TO,
            "model": "ours flat after the budget fills (every later run as a run of the last "
            "block); naive prompt growing linearly at the measured tokens stored per run, "
            "uncached",
            "prompt_tokens_per_request": last["prompt_tokens_per_request"],
            "naive_tokens_per_request": round(naive_at_100k),
            "usd_per_run": last["usd_per_run"],
            "usd_per_day": last["usd_per_day"],
            "usd_total": ours_100k_usd,
            "naive_usd_total": naive_100k_usd,
            "naive_over_window": naive_at_100k > s.info.context_window_tokens,
            "agent_bytes_per_run": last["agent_bytes_per_run"],
            "run_history_bytes": last["tool_run_history_bytes"],
        },
        "wall_s": wall_s,
        "args": {
            "runs": args.runs,
            "seed": args.seed,
            "every": args.every,
            "budget": args.budget,
            "model": DEFAULT_MODEL,
            "effort": args.effort,
        },
    }


def _span(runs: str) -> int:
    a, b = runs.split("-")
    return int(b) - int(a) + 1


_HEAD = [
    ("runs", "runs", "{}"),
    ("req", "requests", "{}"),
    ("tok/req", "prompt_tokens_per_request", "{}"),
    ("naive tok/req", "naive_tokens_per_request", "{}"),
    ("cached", "cached_share", "pct"),
    ("$/run", "usd_per_run", "{:.4f}"),
    ("$/day", "usd_per_day", "{:.2f}"),
    ("naive $/run", "naive_usd_per_run", "{:.4f}"),
    ("agent B/run", "agent_bytes_per_run", "{}"),
    ("agent ev/run", "agent_events_per_run", "{}"),
    ("run B (ev)", None, "run"),
    ("2-tool run B (ev)", None, "tool"),
    ("load_context ms", "load_context_ms", "{:.1f}"),
    ("read ms", "history_read_ms", "{:.2f}"),
]
_WIDTHS = [max(len(h), 18 if fmt in ("run", "tool") else 7) for h, _, fmt in _HEAD]


def _cell(row: dict[str, Any], key: str | None, fmt: str) -> str:
    if fmt == "run":
        return f"{row['run_history_bytes']} ({row['run_history_events']}, {row['run_kind']})"
    if fmt == "tool":
        return f"{row['tool_run_history_bytes']} ({row['tool_run_history_events']})"
    value = row[key] if key else None
    if value is None:
        return "–"
    if fmt == "pct":
        return f"{100 * value:.1f} %"
    return fmt.format(value)


def print_row(row: dict[str, Any], header: bool = False) -> None:
    if header:
        print(" | ".join(h.ljust(w) for (h, _, _), w in zip(_HEAD, _WIDTHS, strict=True)))
        print("-+-".join("-" * w for w in _WIDTHS))
    cells = [_cell(row, key, fmt) for _, key, fmt in _HEAD]
    print(" | ".join(c.ljust(w) for c, w in zip(cells, _WIDTHS, strict=True)), flush=True)
