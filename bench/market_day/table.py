"""The table of market days, by seed, from the days' JSON.

Every policy change is judged on the same fourteen days (bench/market_day/day.py
`--seeds`, or one `--seed` a process, two at a time), and the records in
bench/results/ show them as one row a day and a few lines across them. This
prints both from the JSON the days wrote (`--json-out`: files, or
directories of them), so the table is the figures and nothing typed by hand.
What misses its target is in bold: a day within ±5 % for less than 95 %
of the time, a period's $/h over 1.05 of the oracle's.

    .venv/bin/python -m bench.market_day.table PATH [PATH...]
        [--groups 1-7,8-14] [--json-out PATH]

Each PATH: a market_day JSON or a directory of them (bench/market_day/compare.py
`load_days`). `--groups` adds the lines across the seeds of each range.
Writes bench/results/market_day_table-<time>.json.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import _common
from bench.market_day._report import causes_line
from bench.market_day.compare import BAND_TARGET, RATIO_TARGET, load_days, summary

__all__ = ["HEADER", "across", "row", "seed_groups"]

HEADER = (
    "| seed | within ±5 %, after hour 1 / an hour after each change "
    "| $/h ÷ oracle at 500, 800, 300, 500 | ÷ keeping the fleet, worst "
    "| minutes out: after a change / failures / over, other | spend "
    "| creates / destroys | bridges | trades | thrash | runs |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|"
)
#: The causes `row` sums as "failures" (bench/market_day/_causes.py).
FAILURE_CAUSES = ("failure_too_large_to_spare", "failures_two_at_once", "failure", "bad_boot")


def _bold(text: str, over: bool) -> str:
    return f"**{text}**" if over else text


def row(day: dict[str, Any]) -> str:
    """One day as a row of the table."""
    band = 100 * float(day["within_5pct_after_first_hour"] or 0.0)
    settled = 100 * float(day["within_5pct_settled"] or 0.0)
    ratios = ", ".join(
        _bold(f"{p['ratio']:.3f}", p["ratio"] > RATIO_TARGET + 1e-9)
        for p in day["periods"]
        if p["ratio"] is not None
    )
    out = day["minutes_out_of_band"]
    failures = sum(float(out[c]) for c in FAILURE_CAUSES)
    return (
        f"| {day['seed']} | {_bold(f'{band:.1f}', band < 100 * BAND_TARGET - 1e-9)} / "
        f"{settled:.1f} % | {ratios} | {float(day['worst_dph_vs_no_rebuild'] or 0.0):.3f} | "
        f"{out['after_change']:.0f} / {failures:.0f} / {out['over']:.0f}, {out['other']:.0f} | "
        f"${day['spend_usd']:.2f} | {day['creates']} / {day['destroys']} | "
        f"{day['temporary_rented']} / {day['temporary_failed']} | {day.get('trades') or 0} | "
        f"{day['thrash']} | {day['runs']} |"
    )


def across(days: Sequence[dict[str, Any]], name: str) -> list[str]:
    """The lines across `days` (bench/market_day/compare.py `summary`): the
    band, the periods against the oracle and against keeping the fleet, each
    change's periods, spend, minutes out of band by cause, replacements."""
    s = summary(days)
    n = len(days)
    settled = sum(float(d["within_5pct_settled"] or 0.0) for d in days) / n
    kept = [
        float(p["ratio_no_rebuild"])
        for d in days
        for p in d["periods"]
        if p.get("ratio_no_rebuild") is not None
    ]
    hours = []
    for k, p in enumerate(days[0]["periods"]):
        xs = [float(d["periods"][k]["ratio"]) for d in days if len(d["periods"]) > k]
        met = sum(x <= RATIO_TARGET + 1e-9 for x in xs)
        hours.append(f"hour {p['hour']:g}: {met}/{len(xs)}, {sum(xs) / len(xs):.3f}")
    needed = ", ".join(
        f"{float(d['needed_detectable_to_replacement_max_min'] or 0.0):.0f}" for d in days
    )
    return [
        f"{name}: band met on {s['days_band_met']}, mean {100 * s['band_mean']:.1f} %, "
        f"worst {100 * s['band_worst']:.1f} %; an hour after each change mean "
        f"{100 * settled:.1f} %",
        f"  periods {s['periods']}: met {s['periods_met']}, mean {s['ratio_mean']:.3f}, worst "
        f"{s['ratio_worst']:.3f}; against keeping the fleet met "
        f"{sum(x <= RATIO_TARGET + 1e-9 for x in kept)}, mean "
        f"{sum(kept) / max(1, len(kept)):.3f}",
        "  from " + "; ".join(hours),
        f"  spend mean ${s['spend_mean']:.2f}; thrash {s['thrash']}; trades {s['trades']}; "
        f"minutes out of band a day (mean): {causes_line(days, digits=1)}",
        f"  needed replacement, detection -> rental, max: {needed} min",
    ]


def seed_groups(spec: str | None, seeds: Sequence[int]) -> list[tuple[str, list[int]]]:
    """`--groups` ("1-7,8-14") as (name, seeds present), then all the seeds;
    ValueError on a range that is not "A-B" or "A"."""
    groups: list[tuple[str, list[int]]] = []
    for part in (spec or "").split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise ValueError(f"--groups: {part!r} is not a range of seeds such as 1-7")
        a, b = int(lo), int(hi or lo)
        groups.append((f"days {part}", [s for s in seeds if a <= s <= b]))
    groups.append((f"all {len(seeds)} days", list(seeds)))
    return [(name, ss) for name, ss in groups if ss]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("paths", nargs="+", type=Path, help="a market_day JSON or a directory")
    parser.add_argument("--groups", default=None, help="seed ranges for lines of their own")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    days: dict[tuple[str, str, int], dict[str, Any]] = {}
    try:
        for path in args.paths:
            for key, day in load_days(path).items():
                if key in days:
                    raise ValueError(f"{path}: {key[0]}, {key[1]} faults, seed {key[2]} twice")
                days[key] = day
    except (OSError, ValueError) as exc:
        parser.error(str(exc))
    result: dict[str, Any] = {"tables": []}
    for path_faults in sorted({(k[0], k[1]) for k in days}):
        by_seed = {k[2]: d for k, d in days.items() if (k[0], k[1]) == path_faults}
        seeds = sorted(by_seed)
        try:
            groups = seed_groups(args.groups, seeds)
        except ValueError as exc:
            parser.error(str(exc))
        rows = [row(by_seed[s]) for s in seeds]
        lines = [line for name, ss in groups for line in across([by_seed[s] for s in ss], name)]
        print(f"\n{path_faults[0]}, {path_faults[1]} faults\n\n{HEADER}")
        print("\n".join(rows))
        print("\n```\n" + "\n".join(lines) + "\n```")
        result["tables"].append(
            {"path": path_faults[0], "faults": path_faults[1], "rows": rows, "across": lines}
        )
    _common.write_json("market_day_table", result, args.json_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
