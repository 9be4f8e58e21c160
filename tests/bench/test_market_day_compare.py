"""Market days of two versions side by side (bench/market_day/compare.py), on
made-up days: where a day parted, the summaries, the counts up and down, and
the errors of bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.market_day._causes import CAUSES
from bench.market_day.compare import compare, load_days, parted_at

ROOT = Path(__file__).resolve().parents[2]


def _day(
    seed: int, band: float, ratios: list[float], spend: float, caps: list[float]
) -> dict[str, Any]:
    return {
        "path": "autopilot",
        "faults": "realistic",
        "seed": seed,
        "within_5pct_after_first_hour": band,
        "periods": [{"ratio": r} for r in ratios],
        "spend_usd": spend,
        "thrash": 0,
        "trades": 1,
        "minutes_out_of_band": {c: 10.0 if c == "after_change" else 0.0 for c in CAUSES},
        "samples": [[120.0 * k, 500.0, c, 5.0] for k, c in enumerate(caps)],
    }


def _write(path: Path, *days: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"runs": list(days)}))
    return path


def test_a_day_parts_at_its_first_different_sample() -> None:
    a = _day(1, 0.95, [1.0], 100.0, [500.0, 501.0, 502.0, 503.0])
    b = _day(1, 0.95, [1.0], 100.0, [500.0, 501.0, 480.0, 503.0])
    assert parted_at(a, a) is None
    assert parted_at(a, b) == round(240.0 / 3600, 2)
    # The same to the rounding is the same day.
    c = _day(1, 0.95, [1.0], 100.0, [500.0, 501.005, 502.0, 503.0])
    assert parted_at(a, c) is None


def test_two_versions_compared_seed_by_seed(tmp_path: Path) -> None:
    caps = [500.0] * 5
    before = {
        1: _day(1, 0.940, [1.02, 1.07], 120.0, caps),
        2: _day(2, 0.960, [1.04, 1.04], 110.0, caps),
        3: _day(3, 0.950, [1.06, 1.00], 100.0, caps),
    }
    after = {
        1: _day(1, 0.955, [1.02, 1.04], 118.0, [*caps[:3], 490.0, 500.0]),
        2: before[2],  # the same day
        3: _day(3, 0.930, [1.03, 1.08], 101.0, [500.0, 470.0, *caps[2:]]),
    }
    _write(tmp_path / "b1.json", before[1], before[2])
    _write(tmp_path / "b3.json", before[3])
    _write(tmp_path / "after.json", *after.values())
    versions = {
        "before": load_days(tmp_path / "b1.json"),
        "after": load_days(tmp_path / "after.json"),
    }
    versions["before"].update(load_days(tmp_path / "b3.json"))
    result = compare(versions)
    assert [r["seed"] for r in result["per_seed"]] == [1, 2, 3]
    parted = [r["after"]["parted_at_hour"] for r in result["per_seed"]]
    assert parted == [round(360 / 3600, 2), None, round(120 / 3600, 2)]
    s = result["summary"]["before"]
    assert s["days"] == 3 and s["days_band_met"] == 2 and s["band_worst"] == 0.94
    assert (s["periods_met"], s["periods"], s["ratio_worst"]) == (4, 6, 1.07)
    assert s["minutes_out_a_day"]["after_change"] == 10.0
    d = result["deltas"]["after"]
    assert (d["band_up"], d["band_down"], d["same_day"]) == (1, 1, 1)
    assert (d["spend_up"], d["spend_down"]) == (1, 1)
    # Seed 1's 1.07 → 1.04 and seed 3's 1.06 → 1.03 now met; seed 3's 1.00 → 1.08 missed.
    assert (d["periods_now_met"], d["periods_now_missed"]) == (2, 1)


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no market_day JSON"):
        load_days(empty)
    twice = _write(tmp_path / "twice.json", _day(1, 0.9, [], 1.0, []), _day(1, 0.9, [], 1.0, []))
    with pytest.raises(ValueError, match="seed 1 twice"):
        load_days(twice)
    other = _write(tmp_path / "other.json", _day(2, 0.9, [], 1.0, []))
    with pytest.raises(ValueError, match="no day"):
        compare({"a": load_days(other), "b": {}})
    # From the command line: a usage error (exit 2) with the reason, nothing written.
    out = tmp_path / "out.json"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.market_day.compare",
            str(other),
            str(empty),
            "--json-out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2 and "no market_day JSON" in run.stderr and not out.exists()
