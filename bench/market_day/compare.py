"""Market days of two or more versions of the code, side by side, by seed.

A change to the policy is judged on several market days (bench/market_day/day.py
`--seeds`), and a single day moves by points with its path: every rental
another offer, so another fate (docs/decisions/load-time.md, "Bridges for a failure's
slow replacement"). This reads the days each version wrote (`--json-out`, one
file per seed or one of several seeds; or a directory of them) and prints,
per seed, each version's band, periods against the oracle and spend, and the
hour at which its day parted from the first version's: where the capacity
sampled first differs. A day that never parted is the same decisions; one
that parted late moved by what came after. Then the versions across the
seeds both ran, and how many seeds each figure went up or down on.

    .venv/bin/python -m bench.market_day.compare BEFORE AFTER [MORE...]
        [--json-out PATH]

Each of BEFORE, AFTER: a market_day JSON or a directory of them
(`NAME=PATH` names it in the table; default the file or directory name).
Writes bench/results/market_day_compare-<time>.json.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import _common
from bench.market_day._causes import CAUSES

__all__ = ["Day", "compare", "load_days", "parted_at", "summary"]

#: Proofs/h by which two samples of capacity must differ to count as parted:
#: the same decisions give the same samples to the rounding (3 decimals).
PARTED_BY = 0.01
#: The band's share of the time the issue asks for, and the oracle's ratio.
BAND_TARGET, RATIO_TARGET = 0.95, 1.05


Day = tuple[str, str, int]  # the path, the fault level, the seed


def load_days(path: Path) -> dict[Day, dict[str, Any]]:
    """The days (market_day results) in a JSON file or in every *.json of a
    directory, by path, fault level and seed; ValueError when one of those
    comes twice, or no day is found."""
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    days: dict[Day, dict[str, Any]] = {}
    for f in files:
        try:
            runs = json.loads(f.read_text())["runs"]
        except (KeyError, TypeError, json.JSONDecodeError):
            continue  # not a market day's JSON (a compare's own, say)
        for r in runs:
            key = (str(r["path"]), str(r["faults"]), int(r["seed"]))
            if key in days:
                raise ValueError(f"{f}: {key[0]}, {key[1]} faults, seed {key[2]} twice in {path}")
            days[key] = r
    if not days:
        raise ValueError(f"{path}: no market_day JSON there")
    return days


def parted_at(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """The hour of the first sample whose capacity differs between two days,
    None when none does (the same decisions, or one day is a prefix)."""
    for x, y in zip(a["samples"], b["samples"], strict=False):
        if abs(float(x[2]) - float(y[2])) > PARTED_BY:
            return round(float(x[0]) / 3600, 2)
    return None


def _ratios(day: dict[str, Any]) -> list[float]:
    return [float(p["ratio"]) for p in day["periods"] if p["ratio"] is not None]


def summary(days: Sequence[dict[str, Any]]) -> dict[str, Any]:
    bands = [float(d["within_5pct_after_first_hour"] or 0.0) for d in days]
    ratios = [x for d in days for x in _ratios(d)]
    n = len(days)
    return {
        "days": n,
        "band_mean": round(sum(bands) / n, 4),
        "band_worst": min(bands),
        "days_band_met": sum(b >= BAND_TARGET for b in bands),
        "periods": len(ratios),
        "periods_met": sum(r <= RATIO_TARGET + 1e-9 for r in ratios),
        "ratio_mean": round(sum(ratios) / len(ratios), 4) if ratios else None,
        "ratio_worst": max(ratios, default=None),
        "spend_mean": round(sum(float(d["spend_usd"]) for d in days) / n, 2),
        "thrash": sum(int(d["thrash"]) for d in days),
        "trades": sum(int(d.get("trades") or 0) for d in days),
        "minutes_out_a_day": {
            c: round(sum(float(d["minutes_out_of_band"][c]) for d in days) / n, 1) for c in CAUSES
        },
    }


def compare(versions: dict[str, dict[Day, dict[str, Any]]]) -> dict[str, Any]:
    """Per seed each version's figures and where it parted from the first;
    across the seeds every version has, each one's summary and, for each
    after the first, on how many seeds the band and the spend went up or
    down and how many periods met the ratio that did not (and back)."""
    names = list(versions)
    base = versions[names[0]]
    seeds = sorted(set.intersection(*(set(v) for v in versions.values())))
    if not seeds:
        raise ValueError("the versions have no day (path, faults, seed) in common")
    per_seed = []
    for s in seeds:
        row: dict[str, Any] = {"path": s[0], "faults": s[1], "seed": s[2]}
        for name in names:
            d = versions[name][s]
            row[name] = {
                "band": d["within_5pct_after_first_hour"],
                "ratios": _ratios(d),
                "spend": d["spend_usd"],
                "trades": d.get("trades"),
                "parted_at_hour": None if name == names[0] else parted_at(base[s], d),
            }
        per_seed.append(row)
    summaries = {name: summary([versions[name][s] for s in seeds]) for name in names}
    deltas = {}
    for name in names[1:]:
        band = [
            versions[name][s]["within_5pct_after_first_hour"]
            - base[s]["within_5pct_after_first_hour"]
            for s in seeds
        ]
        spend = [versions[name][s]["spend_usd"] - base[s]["spend_usd"] for s in seeds]
        gained = lost = 0
        for s in seeds:
            for x, y in zip(_ratios(base[s]), _ratios(versions[name][s]), strict=False):
                gained += x > RATIO_TARGET + 1e-9 >= y
                lost += y > RATIO_TARGET + 1e-9 >= x
        deltas[name] = {
            "band_up": sum(d > 1e-9 for d in band),
            "band_down": sum(d < -1e-9 for d in band),
            "band_mean_delta": round(sum(band) / len(seeds), 4),
            "spend_up": sum(d > 0.005 for d in spend),
            "spend_down": sum(d < -0.005 for d in spend),
            "spend_mean_delta": round(sum(spend) / len(seeds), 2),
            "periods_now_met": gained,
            "periods_now_missed": lost,
            "same_day": sum(parted_at(base[s], versions[name][s]) is None for s in seeds),
        }
    return {
        "versions": names,
        "seeds": seeds,
        "per_seed": per_seed,
        "summary": summaries,
        "deltas": deltas,
    }


def _print(result: dict[str, Any]) -> None:
    names = result["versions"]
    print("day                    " + "  ".join(f"{n:>34}" for n in names))
    for row in result["per_seed"]:
        cells = []
        for n in names:
            v = row[n]
            part = "" if v["parted_at_hour"] is None else f" @{v['parted_at_hour']:.1f}h"
            if n != names[0] and v["parted_at_hour"] is None:
                part = " same"
            worst = max(v["ratios"], default=0.0)
            cells.append(f"{100 * v['band']:5.1f} % {worst:.3f} ${v['spend']:7.2f}{part:>8}")
        day = f"{row['path']} {row['faults']} s{row['seed']}"
        print(f"{day:<21}  " + "  ".join(f"{c:>34}" for c in cells))
    print("\n(each cell: within ±5 % after hour 1, the worst period's $/h ÷ oracle, spend,")
    print(" and the hour the day parted from the first version's)")
    for n in names:
        s = result["summary"][n]
        print(
            f"\n{n}: {s['days']} days, band mean {100 * s['band_mean']:.2f} % (worst "
            f"{100 * s['band_worst']:.1f} %), met on {s['days_band_met']}; periods ≤ 1.05 "
            f"{s['periods_met']} of {s['periods']} (mean {s['ratio_mean']}, worst "
            f"{s['ratio_worst']}); spend mean ${s['spend_mean']}; thrash {s['thrash']}; "
            f"trades {s['trades']}"
        )
        out = ", ".join(
            f"{c.replace('_', ' ')} {m}" for c, m in s["minutes_out_a_day"].items() if m
        )
        print(f"  minutes out of band a day: {out or 'none'}")
    for n, d in result["deltas"].items():
        print(
            f"\n{n} against {names[0]}: band up on {d['band_up']} seeds, down on "
            f"{d['band_down']} (mean {100 * d['band_mean_delta']:+.2f} points); spend up on "
            f"{d['spend_up']}, down on {d['spend_down']} (mean ${d['spend_mean_delta']:+.2f}); "
            f"periods now within 1.05 {d['periods_now_met']}, now over {d['periods_now_missed']}; "
            f"the same day on {d['same_day']} seeds"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("versions", nargs="+", help="NAME=PATH or PATH (a JSON or a directory)")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    if len(args.versions) < 2:
        parser.error("give at least two versions")
    versions: dict[str, dict[Day, dict[str, Any]]] = {}
    for spec in args.versions:
        name, _, path = spec.rpartition("=")
        p = Path(path)
        name = name or p.stem
        if name in versions:
            parser.error(f"two versions named {name!r}: name them NAME=PATH")
        try:
            versions[name] = load_days(p)
        except (OSError, ValueError) as e:
            parser.error(str(e))
    try:
        result = compare(versions)
    except ValueError as e:
        parser.error(str(e))
    _print(result)
    out = _common.write_json("market_day_compare", result, args.json_out)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
