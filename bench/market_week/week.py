"""Market week: 7 simulated days in a row on the simulator's Snark Market,
per seed, each path's profit beside a foresight oracle's.

The market is the simulator's (docs/SIMULATOR.md, "The Snark Market"):
clients' requests along a daily curve with bursts, five other providers
drawn from the seed, the market's price, slots from challenge proofs, the
45-minute deadline and its penalty. Per seed and day each path reports its
profit (revenue at `--fil-usd` less rental, transfer and LLM), paid proofs,
$ per proof (the costs over the paid proofs), challenge proofs, penalties
and slots (the most in use, and samples over the slots). The paths:

- ``fixed``: the best fixed fleet: N GPUs at one ask price all week, the
  pair with the most profit over days 2-7 of a grid (`--gpus` x
  `--prices`, then every N beside the best at its price), the GPUs priced
  from the seed's vast.ai offer book (bench/market_week/_market_only.py);
- ``oracle``: the foresight oracle, a MILP (bench/market_week/_oracle.py:
  what it assumes is its docstring);
- ``autopilot``, ``llm``, ``demand``: the agent (bench/market_week/_agent.py);
  a path whose pieces are not merged yet is reported "not available: <why>".

    .venv/bin/python -m bench.market_week.week [--seeds 1,...,7] [--days 7]
        [--paths fixed,oracle,autopilot,llm,demand] [--json-out F] [--md-out F]

The targets (issue 53) are summed over the seeds, days 2-7: profit ≥ 90 %
of the oracle's, $ per proof ≤ 1.10x the oracle's, no penalty, slots never
exceeded, and the LLM path within 5 % of the autopilot's profit. Writes
bench/results/market_week-<time>.json (`--json-out`), with `--md-out` the
tables in Markdown.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import _common
from bench.demand_day._oracle import OfferType, offer_types

from ._agent import AGENT_PATHS, NotAvailable, agent_settings, availability, run_agent_week
from ._market_only import (
    DEFAULT_CURVE,
    FIL_USD,
    MarketRun,
    WeekSetup,
    best_fixed,
    fixed_days,
    gpu_hour_usd,
    offer_book,
    run_market,
    sweep_fixed,
)
from ._oracle import WeekOracle, pool, solve

__all__ = ["FAST_PATHS", "PATHS", "main", "summary", "week_of_seed"]

FAST_PATHS = ("fixed", "oracle")
PATHS = (*FAST_PATHS, *AGENT_PATHS)
#: The targets (issue 53).
PROFIT_GOAL = 0.90
PER_PROOF_GOAL = 1.10
LLM_GOAL = 0.05
#: Offer types the oracle rents from (the cheapest per proof; the rest merged).
ORACLE_TYPES = 10
#: Columns of the printed table, per path.
SHOWN = (("profit_usd", "profit $"), ("paid_proofs", "proofs"), ("usd_per_proof", "$/proof"))
#: And the agent paths' own: penalties, late answers, the most slots in use
#: of the slots, the most machines proving, rentals, and the day's wall time.
AGENT_SHOWN = (
    ("penalties", "pen"),
    ("late", "late"),
    ("slots_used", "slots used/slots"),
    ("peak_machines_proving", "machines"),
    ("rentals", "rentals"),
    ("wall_s", "wall s"),
)


def _oracle_week(
    runs: Sequence[MarketRun],
    prices: Sequence[int],
    types: list[OfferType],
    setup: WeekSetup,
    *,
    step_s: float,
    limit_s: float,
) -> tuple[WeekOracle, dict[int, float]]:
    """The oracle at the best ask price: each price's LP relaxation (a bound,
    fast) picks it, the MILP is solved at it. Returns the MILP's answer and
    each price's relaxed profit."""
    steps = round(setup.days * 86_400 / step_s)
    relaxed: dict[int, float] = {}
    work = {}
    for q in prices:
        work[q] = pool(runs, q, steps, step_s)
        lp = solve(
            work[q],
            types,
            step_s=step_s,
            fil_usd=setup.fil_usd,
            start_challenges=setup.challenges,
            gpus=[type_gpus(t) for t in types],
            ask_nfil=q,
            relax=True,
        )
        relaxed[q] = round(lp.profit_usd, 2) if lp.profit_usd is not None else -math.inf
    best = max(prices, key=lambda q: relaxed[q])
    oracle = solve(
        work[best],
        types,
        step_s=step_s,
        fil_usd=setup.fil_usd,
        start_challenges=setup.challenges,
        gpus=[type_gpus(t) for t in types],
        ask_nfil=best,
        time_limit_s=limit_s,
        mip_gap=0.01,
    )
    return oracle, relaxed


def type_gpus(ty: OfferType) -> int:
    """GPUs a machine of the type has: its name's ``{n}x{gpu}/...``
    (bench/demand_day/_oracle.py `offer_types`); the merged rest counts as
    one, which lets a slot prove the most (the oracle stays a bound)."""
    head, sep, _ = ty.name.partition("x")
    return int(head) if sep and head.isdigit() else 1


def _oracle_days(oracle: WeekOracle) -> list[dict[str, Any]]:
    return [
        {
            "day": int(d["day"]),
            "paid_proofs": round(d["proofs"], 1),
            "p": round(d["p"], 1),
            "revenue_usd": round(d["revenue_usd"], 4),
            "rental_usd": round(d["rental_usd"], 4),
            "transfer_usd": 0.0,  # in the offers' $/h (offer_dph)
            "llm_usd": 0.0,
            "profit_usd": round(d["profit_usd"], 4),
            "usd_per_proof": round(d["rental_usd"] / d["proofs"], 5) if d["proofs"] else None,
            "penalties": 0,
            "over_slots": 0,
        }
        for d in oracle.days
    ]


async def week_of_seed(
    seed: int,
    setup: WeekSetup,
    paths: Sequence[str],
    *,
    gpus: Sequence[int],
    prices: Sequence[int],
    step_s: float = 900.0,
    oracle_limit_s: float = 60.0,
    start_price_nfil: int = 5_000_000,
    agent_step: int = 120,
    keep_store: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One seed's week on every path asked for."""
    started = time.monotonic()
    rows = await offer_book(seed)
    book = gpu_hour_usd(rows, max(gpus))
    out: dict[str, Any] = {
        "seed": seed,
        "book": {
            "offers": len(rows),
            "usd_gpu_h": book.usd_gpu_h,
            "usd_per_p": round(book.usd_per_p, 5),
            "cheapest_offers": book.offers,
            "their_p_per_h": book.covers_p_per_h,
        },
        "paths": {},
    }
    runs: list[MarketRun] = []
    if "fixed" in paths or "oracle" in paths:
        runs = sweep_fixed(setup, seed, gpus, prices, book.usd_gpu_h)
        best = best_fixed(runs, book.usd_gpu_h, setup.fil_usd)
        out["paths"]["fixed"] = {
            "available": True,
            "gpus": best.gpus,
            "price_nfil": best.price_nfil,
            "start_challenges": best.challenges,
            "days": fixed_days(best, book.usd_gpu_h, setup.fil_usd),
            "sweep": [
                {
                    "gpus": r.gpus,
                    "price_nfil": r.price_nfil,
                    "profit_usd_days_2_on": round(r.profit_usd(book.usd_gpu_h, setup.fil_usd), 2),
                    "penalties": sum(d.penalties for d in r.days),
                    "cpu_s": r.cpu_s,
                }
                for r in runs
            ],
            "runs": len(runs),
            "cpu_s": round(sum(r.cpu_s for r in runs), 1),
        }
    if "oracle" in paths:
        alone = run_market(setup, seed, 0, 0, enabled=False)
        runs.append(alone)
        types = offer_types(rows, ORACLE_TYPES)
        oracle, relaxed = _oracle_week(
            runs, prices, types, setup, step_s=step_s, limit_s=oracle_limit_s
        )
        out["paths"]["oracle"] = {
            "available": oracle.feasible,
            **({} if oracle.feasible else {"why": oracle.message}),
            "message": oracle.message,
            "price_nfil": oracle.ask_nfil,
            "profit_usd": _r(oracle.profit_usd),
            "bound_usd": _r(oracle.bound_usd),
            "relaxed_profit_usd_by_price": {str(q): v for q, v in relaxed.items()},
            "challenge_proofs": round(oracle.challenge_proofs, 1),
            "rentals": oracle.rentals,
            "offer_types": len(types),
            "solve_s": oracle.solve_s,
            "days": _oracle_days(oracle),
            "market_alone": [
                {"day": d.day, "arrived": d.arrived, "refused": d.refused, "expired": d.expired}
                for d in alone.days
            ],
        }
    for path in paths:
        if path in FAST_PATHS:
            continue
        try:
            days = await run_agent_week(
                path,
                setup,
                seed,
                start_price_nfil=start_price_nfil,
                step=agent_step,
                keep_store=None if keep_store is None else keep_store / f"{path}-s{seed}.db",
                overrides=overrides,
            )
        except NotAvailable as exc:
            out["paths"][path] = {"available": False, "why": str(exc)}
            continue
        settings = agent_settings(path, setup) | (overrides or {})
        out["paths"][path] = {"available": True, "settings": settings, "days": days}
    out["wall_s"] = round(time.monotonic() - started, 1)
    return out


def _window(days: int) -> range:
    """The days the targets count: 2 on (all, for a one-day run)."""
    return range(2, days + 1) if days > 1 else range(1, 2)


def _totals(path: dict[str, Any], window: range) -> dict[str, float] | None:
    if not path.get("available"):
        return None
    picked = [d for d in path["days"] if d["day"] in window]
    cost = sum(d["rental_usd"] + d["transfer_usd"] + d["llm_usd"] for d in picked)
    proofs = sum(d["paid_proofs"] for d in picked)
    return {
        "profit_usd": round(sum(d["profit_usd"] for d in picked), 2),
        "cost_usd": round(cost, 2),
        "paid_proofs": round(proofs, 1),
        "usd_per_proof": round(cost / proofs, 5) if proofs else math.nan,
        "penalties": sum(d.get("penalties", 0) for d in picked),
        "over_slots": sum(d.get("over_slots", 0) for d in picked),
    }


def summary(seeds: Sequence[dict[str, Any]], paths: Sequence[str], days: int) -> dict[str, Any]:
    """Each path's totals over the targets' days and seeds, and the targets."""
    window = _window(days)
    out: dict[str, Any] = {"days": [window.start, window.stop - 1], "paths": {}}
    oracle_per_seed = [_totals(s["paths"].get("oracle", {}), window) for s in seeds]
    oracle = _sum(oracle_per_seed)
    for path in paths:
        per_seed = [_totals(s["paths"].get(path, {}), window) for s in seeds]
        whys = sorted({s["paths"][path].get("why", "") for s in seeds if path in s["paths"]} - {""})
        total = _sum(per_seed)
        if total is None:
            out["paths"][path] = {"available": False, "why": "; ".join(whys)}
            continue
        row: dict[str, Any] = {"available": True, **total}
        if oracle is not None and path != "oracle":
            profit = total["profit_usd"] / oracle["profit_usd"] if oracle["profit_usd"] else None
            per = total["usd_per_proof"] / oracle["usd_per_proof"]
            row["profit_vs_oracle"] = _r(profit)
            row["per_proof_vs_oracle"] = _r(per)
            row["per_seed_profit_vs_oracle"] = [
                _r(p["profit_usd"] / o["profit_usd"]) if p and o and o["profit_usd"] else None
                for p, o in zip(per_seed, oracle_per_seed, strict=True)
            ]
            row["targets"] = {
                f"profit >= {PROFIT_GOAL:.0%} of the oracle's": bool(
                    profit is not None and profit >= PROFIT_GOAL
                ),
                f"$/proof <= {PER_PROOF_GOAL}x the oracle's": bool(per <= PER_PROOF_GOAL),
                "0 penalties": total["penalties"] == 0,
                "slots never exceeded": total["over_slots"] == 0,
            }
        out["paths"][path] = row
    # A bound is above every path on every seed; a seed where it is not says so.
    out["oracle_below"] = [
        [week["seed"], path]
        for week, o in zip(seeds, oracle_per_seed, strict=True)
        for path in paths
        if o is not None
        and path != "oracle"
        and (t := _totals(week["paths"].get(path, {}), window)) is not None
        and t["profit_usd"] > o["profit_usd"] + 1e-6
    ]
    auto, llm = out["paths"].get("autopilot"), out["paths"].get("llm")
    if auto and llm and auto.get("available") and llm.get("available"):
        gap = abs(llm["profit_usd"] - auto["profit_usd"]) / abs(auto["profit_usd"] or 1.0)
        llm["vs_autopilot"] = _r(gap)
        llm.setdefault("targets", {})[f"within {LLM_GOAL:.0%} of the autopilot"] = gap <= LLM_GOAL
    return out


def _sum(rows: Sequence[dict[str, float] | None]) -> dict[str, float] | None:
    if not rows or any(r is None for r in rows):
        return None
    got = [r for r in rows if r is not None]
    cost = sum(r["cost_usd"] for r in got)
    proofs = sum(r["paid_proofs"] for r in got)
    return {
        "profit_usd": round(sum(r["profit_usd"] for r in got), 2),
        "cost_usd": round(cost, 2),
        "paid_proofs": round(proofs, 1),
        "usd_per_proof": round(cost / proofs, 5) if proofs else math.nan,
        "penalties": sum(r["penalties"] for r in got),
        "over_slots": sum(r["over_slots"] for r in got),
    }


# ------------------------------------------------------------------ tables


def seed_table(week: dict[str, Any], paths: Sequence[str]) -> list[str]:
    """The seed's days, a column group per available path; then the paths
    that are not available and why."""
    shown = [p for p in paths if week["paths"].get(p, {}).get("available")]
    head = ["day"]
    for p in shown:
        head += [f"{p} {label}" for _, label in SHOWN]
        if p in AGENT_PATHS:
            head += [f"{p} {label}" for _, label in AGENT_SHOWN]
    fixed = week["paths"].get("fixed")
    if fixed and fixed.get("available"):
        head += ["fixed pen", "fixed slots", "fixed peak used", "fixed challenges"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    count = max((len(week["paths"][p]["days"]) for p in shown), default=0)
    for i in range(count):
        row: list[Any] = [i + 1]
        for p in shown:
            day = week["paths"][p]["days"][i]
            row += [day.get(key) for key, _ in SHOWN]
            if p in AGENT_PATHS:
                used = f"{day.get('peak_slots_used')}/{day.get('slots')}"
                row += [used if k == "slots_used" else day.get(k) for k, _ in AGENT_SHOWN]
        if fixed and fixed.get("available"):
            d = fixed["days"][i]
            row += [d["penalties"], d["slots"], d["peak_slots_used"], d["challenge_proofs"]]
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    for p in paths:
        info = week["paths"].get(p, {})
        if not info.get("available"):
            lines.append(f"\n{p}: not available: {info.get('why', 'not run')}")
    return lines


def summary_lines(summ: dict[str, Any]) -> list[str]:
    first, last = summ["days"]
    below = summ.get("oracle_below") or []
    note = [f"The oracle is below a path (seed, path): {below}", ""] if below else []
    lines = [
        f"Days {first}-{last}, all seeds:",
        "",
        "| path | profit $ | proofs | $/proof | vs oracle: profit | $/proof | penalties"
        " | over slots | targets met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path, row in summ["paths"].items():
        if not row.get("available"):
            lines.append(f"| {path} | not available: {row.get('why', '')} |||||||| ")
            continue
        targets = row.get("targets", {})
        met = ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in targets.items()) or "–"
        cells = [
            path,
            row["profit_usd"],
            row["paid_proofs"],
            row["usd_per_proof"],
            row.get("profit_vs_oracle"),
            row.get("per_proof_vs_oracle"),
            row["penalties"],
            row["over_slots"],
            met,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return [*note, *lines]


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1 else f"{value:.1f}"
    return str(value)


def _markdown(args: argparse.Namespace, setup: WeekSetup, weeks: list[Any], summ: Any) -> str:
    lines = [
        f"# Market week ({datetime.now(UTC):%Y-%m-%d})",
        "",
        f"    .venv/bin/python -m bench.market_week.week {' '.join(args.argv)}",
        "",
        f"{setup.days} days of the Snark Market (clients' curve `{setup.curve}`,"
        f" {setup.bursts_per_day:g} bursts a day; the node starting with"
        f" {setup.challenges} challenge proofs), revenue at {setup.fil_usd} $/FIL.",
        "",
    ]
    for week in weeks:
        fixed = week["paths"].get("fixed", {})
        oracle = week["paths"].get("oracle", {})
        lines += [f"## Seed {week['seed']}", ""]
        lines.append(
            f"A GPU (30 P/h) at ${week['book']['usd_gpu_h']}/h: the"
            f" {week['book']['cheapest_offers']} cheapest offers per proof of"
            f" {week['book']['offers']} allowed."
            + (
                f" Best fixed: {fixed['gpus']} GPUs asking {fixed['price_nfil'] / 1e9:g} FIL/P"
                f" ({fixed['runs']} runs, {fixed['cpu_s']} s CPU)."
                if fixed.get("available")
                else ""
            )
            + (
                f" Oracle: {oracle['message']} in {oracle['solve_s']} s at an ask of"
                f" {oracle['price_nfil'] / 1e9:g} FIL/P."
                if oracle.get("available")
                else ""
            )
        )
        lines += ["", *seed_table(week, args.path_list), ""]
    lines += ["## Summary", "", *summary_lines(summ), ""]
    return "\n".join(lines) + "\n"


def _ints(text: str) -> list[int]:
    return [int(float(v)) for v in text.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--seeds", default="1,2,3,4,5,6,7")
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--paths", default=",".join(FAST_PATHS), help=f"of {', '.join(PATHS)}")
    parser.add_argument("--curve", default=DEFAULT_CURVE, help="clients' requests/h, HOUR:RATE,...")
    parser.add_argument("--bursts", type=float, default=3.0, help="bursts a day (3)")
    parser.add_argument(
        "--challenges", type=int, default=800, help="the node's challenge proofs at the start"
    )
    parser.add_argument("--fil-usd", type=float, default=FIL_USD, help="$ per FIL (2.5)")
    parser.add_argument(
        "--gpus", default="1,2,4,8,12,16", help="the fixed fleets' GPUs, coarse grid"
    )
    parser.add_argument(
        "--prices", default="4000000,5500000,7000000", help="the fixed asks, nFIL per P"
    )
    parser.add_argument("--step", type=float, default=900.0, help="the oracle's step, seconds")
    parser.add_argument("--oracle-limit", type=float, default=60.0, help="MILP seconds at most")
    parser.add_argument(
        "--start-price", type=int, default=5_000_000, help="the agent paths' first ask, nFIL per P"
    )
    parser.add_argument("--agent-step", type=int, default=120, help="agent paths: seconds a step")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="agent paths: an agent config key over the path's (VALUE as JSON)",
    )
    parser.add_argument(
        "--keep-store", type=Path, default=None, help="agent paths: keep each week's store here"
    )
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--md-out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    args.path_list = [p.strip() for p in args.paths.split(",") if p.strip()]
    unknown = [p for p in args.path_list if p not in PATHS]
    if unknown:
        parser.error(f"--paths: unknown {unknown}; known: {', '.join(PATHS)}")
    if args.days < 1:
        parser.error("--days is at least 1")
    try:
        overrides = {k: json.loads(v) for k, _, v in (item.partition("=") for item in args.set)}
    except json.JSONDecodeError as exc:
        parser.error(f"--set: VALUE is JSON ({exc})")
    setup = WeekSetup(
        days=args.days,
        curve=args.curve,
        bursts_per_day=args.bursts,
        challenges=args.challenges,
        fil_usd=args.fil_usd,
    )
    for path in args.path_list:
        if path not in FAST_PATHS and (why := availability(path)) is not None:
            print(f"{path}: not available: {why}")
    started = time.monotonic()
    weeks = []
    for seed in _ints(args.seeds):
        week = asyncio.run(
            week_of_seed(
                seed,
                setup,
                args.path_list,
                gpus=_ints(args.gpus),
                prices=_ints(args.prices),
                step_s=args.step,
                oracle_limit_s=args.oracle_limit,
                start_price_nfil=args.start_price,
                agent_step=args.agent_step,
                keep_store=args.keep_store,
                overrides=overrides,
            )
        )
        weeks.append(week)
        print(f"\nmarket week — seed {seed} ({week['wall_s']} s)")
        print("\n".join(seed_table(week, args.path_list)))
    summ = summary(weeks, args.path_list, args.days)
    print()
    print("\n".join(summary_lines(summ)))
    data = {
        "setup": {
            "days": setup.days,
            "curve": setup.curve,
            "bursts_per_day": setup.bursts_per_day,
            "challenges": setup.challenges,
            "fil_usd": setup.fil_usd,
            "gpus": _ints(args.gpus),
            "prices_nfil": _ints(args.prices),
            "oracle_step_s": args.step,
            "agent_overrides": overrides,
        },
        "seeds": weeks,
        "summary": summ,
        "args": args.argv,
        "wall_s": round(time.monotonic() - started, 1),
    }
    out = _common.write_json("market_week", data, args.json_out)
    print(f"\nwrote {out}")
    if args.md_out is not None:
        args.md_out.write_text(_markdown(args, setup, weeks, summ))
        print(f"wrote {args.md_out}")
    return 0


def _r(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


if __name__ == "__main__":
    raise SystemExit(main())
