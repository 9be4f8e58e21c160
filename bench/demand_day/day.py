"""Demand day: the fleet against work with deadlines, beside a foresight oracle.

The simulator's work source (docs/SIMULATOR.md, "Demand: work with
deadlines") sends work along a daily curve with bursts, each item due 30
minutes after it arrives; the autopilot agent holds a target on the
realistic market, on the time-skipping server (bench/demand_day/_day.py).
Per seed: proofs on time (% of those that arrived), $ per proof done on
time (the simulator's billing), idle machine-hours, rentals and releases;
and the foresight oracle's $ per proof: the cheapest schedule of rentals
meeting every deadline, a MILP (bench/demand_day/_oracle.py).

    .venv/bin/python -m bench.demand_day.day [--hours 24] [--seeds 1,...,7]
        [--paths fixed] [--target 900] [--search 700,900,1100]

`--search` runs the fixed-target day at each target given and reports the
cheapest that reaches the on-time goal (99.5 %) on every seed: the best
fixed target. Prints a table per day and writes
bench/results/demand_day-<time>.json (`--json-out`), and with `--md-out` a
short Markdown summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.service import RPCError

from bench import _common
from bench.demand_day._day import DEFAULT_CURVE, ON_TIME_GOAL, PATHS, default_demand, run_day

__all__ = ["best_fixed", "main"]

#: Times a day is run before its failure stops the benchmark.
DAY_ATTEMPTS = 2

#: The figures printed per day (the JSON has them all).
SHOWN = (
    "on_time_pct",
    "usd_per_proof_on_time",
    "idle_machine_hours",
    "rentals",
    "releases",
    "arrived",
    "done_on_time",
    "late",
    "expired",
    "left_over",
    "usd",
    "vs_oracle",
    "wall_s",
)


def best_fixed(days: list[dict[str, Any]], goal: float = ON_TIME_GOAL) -> dict[str, Any] | None:
    """The cheapest fixed target (mean $ per proof on time over its seeds)
    whose every seed reached `goal` % on time; None when none did."""
    by_target: dict[float, list[dict[str, Any]]] = {}
    for d in days:
        by_target.setdefault(d["target"], []).append(d)
    met = [
        (sum(d["usd_per_proof_on_time"] for d in ds) / len(ds), target)
        for target, ds in by_target.items()
        if all((d["on_time_pct"] or 0) >= goal and d["usd_per_proof_on_time"] for d in ds)
    ]
    if not met:
        return None
    per, target = min(met)
    return {"target": target, "usd_per_proof_on_time": round(per, 4), "goal_pct": goal}


def _markdown(args: argparse.Namespace, days: list[dict[str, Any]], best: Any) -> str:
    cols = ["path", "seed", "target", *SHOWN[:5], "oracle $/proof", "vs_oracle"]
    lines = [
        f"# Demand day ({datetime.now(UTC):%Y-%m-%d})",
        "",
        f"    {' '.join(sys.argv[:1] and ['.venv/bin/python -m bench.demand_day.day'])}"
        f" {' '.join(args.argv)}",
        "",
        f"{args.hours} h of demand from the curve's hour {args.start_hour} (curve `{args.curve}`,"
        " 3 bursts a day, 30-minute deadline)"
        f" after {args.warmup} h of warm-up; the autopilot; `bench/demand_day/`.",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for d in days:
        row = [d["path"], d["seed"], d["target"], *(d[k] for k in SHOWN[:5])]
        row += [d["oracle"]["usd_per_proof"], d["vs_oracle"]]
        lines.append("| " + " | ".join("–" if v is None else str(v) for v in row) + " |")
    lines += ["", f"Best fixed target: {best}" if args.search else "No target search run."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--hours", type=float, default=24.0, help="hours of demand (24)")
    parser.add_argument("--seeds", default="1,2,3,4,5,6,7")
    parser.add_argument(
        "--paths", default="fixed", help=f"how the target is set: {', '.join(PATHS)}"
    )
    parser.add_argument("--target", type=float, default=900.0, help="the fixed target, proofs/h")
    parser.add_argument(
        "--search",
        default=None,
        help="fixed targets to run, e.g. 700,900,1100: the cheapest meeting the goal is reported",
    )
    parser.add_argument("--curve", default=DEFAULT_CURVE, help="the demand curve, HOUR:RATE,...")
    parser.add_argument(
        "--start-hour", type=float, default=0.0, help="the curve's hour the demand starts at (0)"
    )
    parser.add_argument("--warmup", type=float, default=1.0, help="hours before the demand (1)")
    parser.add_argument("--step", type=int, default=120, help="seconds per step")
    parser.add_argument("--oracle-limit", type=float, default=60.0, help="MILP seconds at most")
    parser.add_argument(
        "--clock",
        choices=("frozen", "wall"),
        default="frozen",
        help="the test server's clock while work is in flight: frozen (one seed, one day;"
        " needs libfaketime) or wall (as before: a day differs with the machine's load)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an agent config key over the path's, e.g. demand_headroom=0.1 (repeatable)",
    )
    parser.add_argument(
        "--keep-store",
        type=Path,
        default=None,
        help="a directory to keep each day's store in (PATH-sSEED-TARGET.db): its runs' messages",
    )
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--md-out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    paths = [p.strip() for p in args.paths.split(",")]
    unknown = [p for p in paths if p not in PATHS]
    if unknown:
        parser.error(f"--paths: unknown {unknown}; known: {', '.join(PATHS)}")
    overrides = {k: json.loads(v) for k, _, v in (item.partition("=") for item in args.set)}
    seeds = [int(s) for s in args.seeds.split(",")]
    targets = [float(t) for t in args.search.split(",")] if args.search else [args.target]
    runs = [(p, s, t) for p in paths for t in targets for s in seeds]
    if args.search and paths != ["fixed"]:
        runs += [(p, s, args.target) for p in paths if p != "fixed" for s in seeds]
    demand = default_demand(args.curve)
    days = []
    for path, seed, target in runs:
        for attempt in range(1, DAY_ATTEMPTS + 1):
            try:
                day = asyncio.run(
                    run_day(
                        path,
                        seed,
                        args.hours,
                        target,
                        demand,
                        step=args.step,
                        warmup_h=args.warmup,
                        start_hour=args.start_hour,
                        oracle_limit_s=args.oracle_limit,
                        overrides=overrides,
                        frozen=args.clock == "frozen",
                        keep_store=args.keep_store / f"{path}-s{seed}-{target:g}.db"
                        if args.keep_store
                        else None,
                    )
                )
            except RPCError as exc:
                # The time-skipping server stopped skipping (or died): a
                # loaded machine. The day is run again from the start.
                print(f"{path} seed {seed}: the test server failed ({exc}); attempt {attempt}")
                if attempt == DAY_ATTEMPTS:
                    raise
                continue
            day["attempts"] = attempt
            break
        days.append(day)
        title = f"demand day — {path}, seed {seed}, target {target:.0f}"
        oracle = day["oracle"]
        shown = {k: day[k] for k in SHOWN}
        shown["oracle_usd_per_proof"] = oracle["usd_per_proof"]
        _common.print_table(title, shown)
        print(
            f"  oracle: {oracle['message']} in {oracle['solve_s']} s, "
            f"{oracle['offer_types']} offer types, "
            f"{oracle['arrivals']:.0f} arrivals (the day's: {day['arrived']})"
        )
    best = best_fixed([d for d in days if d["path"] == "fixed"]) if args.search else None
    if args.search:
        print(f"\nbest fixed target (≥ {ON_TIME_GOAL} % on time on every seed): {best}")
    out = _common.write_json(
        "demand_day", {"days": days, "best_fixed": best, "args": args.argv}, args.json_out
    )
    print(f"\nwrote {out}")
    if args.md_out is not None:
        args.md_out.write_text(_markdown(args, days, best))
        print(f"wrote {args.md_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
