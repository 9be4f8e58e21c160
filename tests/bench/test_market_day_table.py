"""The table of market days from their JSON (bench/market_day/table.py),
on made-up days: a row with what misses its target in bold, the lines
across seeds and groups, and bad input refused with a clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.market_day._causes import CAUSES
from bench.market_day.table import across, row, seed_groups

ROOT = Path(__file__).resolve().parents[2]


def _day(seed: int, band: float, ratios: list[float], **extra: Any) -> dict[str, Any]:
    out = dict.fromkeys(CAUSES, 0.0)
    out.update(after_change=40.0, failure_too_large_to_spare=20.0, bad_boot=2.0, over=6.0)
    return {
        "path": "autopilot",
        "faults": "realistic",
        "seed": seed,
        "within_5pct_after_first_hour": band,
        "within_5pct_settled": 0.98,
        "periods": [
            {"hour": h, "ratio": r, "ratio_no_rebuild": r - 0.01}
            for h, r in zip((0, 6, 12, 18), ratios, strict=True)
        ],
        "worst_dph_vs_no_rebuild": max(ratios) - 0.01,
        "minutes_out_of_band": out,
        "spend_usd": 118.5,
        "creates": 60,
        "destroys": 44,
        "temporary_rented": 20,
        "temporary_failed": 1,
        "trades": 3,
        "thrash": 0,
        "runs": 360,
        "needed_detectable_to_replacement_max_min": 1.0,
        "samples": [],
        **extra,
    }


def test_a_row_bolds_what_misses_its_target_and_sums_the_failures() -> None:
    line = row(_day(3, 0.9431, [1.0, 1.05, 1.0501, 1.2]))
    assert line.startswith("| 3 | **94.3** / 98.0 % | 1.000, 1.050, **1.050**, **1.200** | 1.190 |")
    # failures: too large to spare 20 + a bad boot 2; over 6, other 0
    assert "| 40 / 22 / 6, 0 | $118.50 | 60 / 44 | 20 / 1 | 3 | 0 | 360 |" in line
    assert row(_day(4, 0.95, [1.0] * 4)).startswith("| 4 | 95.0 / 98.0 % |")


def test_the_lines_across_count_days_and_periods_met() -> None:
    days = [_day(1, 0.96, [1.0, 1.06, 1.0, 1.0]), _day(2, 0.94, [1.1, 1.0, 1.0, 1.02])]
    first, periods, hours, spend, needed = across(days, "days 1-2")
    assert first == (
        "days 1-2: band met on 1, mean 95.0 %, worst 94.0 %; an hour after each change mean 98.0 %"
    )
    assert periods.startswith("  periods 8: met 6, mean 1.022, worst 1.100;")
    assert "against keeping the fleet met 7" in periods  # 1.05 is met, 1.09 misses
    assert hours == (
        "  from hour 0: 1/2, 1.050; hour 6: 1/2, 1.030; hour 12: 2/2, 1.000; hour 18: 2/2, 1.010"
    )
    assert "after change 40.0, failure too large to spare 20.0, over 6.0, bad boot 2.0" in spend
    assert needed == "  needed replacement, detection -> rental, max: 1, 1 min"


def test_groups_are_ranges_of_the_seeds_present_then_all() -> None:
    assert seed_groups("1-2, 5", [1, 2, 3, 5]) == [
        ("days 1-2", [1, 2]),
        ("days 5", [5]),
        ("all 4 days", [1, 2, 3, 5]),
    ]
    assert seed_groups(None, [7]) == [("all 1 days", [7])]
    assert seed_groups("9-12", [1]) == [("all 1 days", [1])]  # an empty range is left out
    with pytest.raises(ValueError, match="'a-3' is not a range"):
        seed_groups("a-3", [1])


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.market_day.table", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_script_prints_the_table_and_refuses_bad_input(tmp_path: Path) -> None:
    days = tmp_path / "days"
    days.mkdir()
    for s in (1, 2):
        (days / f"s{s}.json").write_text(json.dumps({"runs": [_day(s, 0.95, [1.0] * 4)]}))
    done = _run(str(days), "--groups", "1-1", "--json-out", str(tmp_path / "t.json"))
    assert done.returncode == 0, done.stderr
    assert "| 1 | 95.0 / 98.0 % |" in done.stdout and "| 2 | 95.0 / 98.0 % |" in done.stdout
    assert "days 1-1: band met on 1" in done.stdout and "all 2 days: band met on 2" in done.stdout
    saved = json.loads((tmp_path / "t.json").read_text())
    assert len(saved["tables"][0]["rows"]) == 2
    # the same day twice, a range that is not one, a path with no day: errors, no table
    twice = _run(str(days), str(days / "s1.json"), "--json-out", str(tmp_path / "x.json"))
    assert twice.returncode == 2 and "seed 1 twice" in twice.stderr
    bad = _run(str(days), "--groups", "one", "--json-out", str(tmp_path / "y.json"))
    assert bad.returncode == 2 and "'one' is not a range of seeds" in bad.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    none = _run(str(empty), "--json-out", str(tmp_path / "z.json"))
    assert none.returncode == 2 and "no market_day JSON" in none.stderr
    assert not any((tmp_path / n).exists() for n in ("x.json", "y.json", "z.json"))
