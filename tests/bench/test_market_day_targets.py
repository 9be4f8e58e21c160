"""The market day's schedule can be shortened for measuring what follows a
change on many markets (bench/market_day/_truth.py `parse_targets`, read from
MARKET_DAY_TARGETS); a bad schedule is refused with what is wrong."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.market_day._truth import DAY_TARGETS, parse_targets

ROOT = Path(__file__).resolve().parents[2]


def test_a_schedule_is_read_as_hours_and_targets() -> None:
    assert parse_targets("0:500, 1.5:800,3:300,4:500") == (
        (0.0, 500.0),
        (1.5, 800.0),
        (3.0, 300.0),
        (4.0, 500.0),
    )
    assert parse_targets(",".join(f"{h}:{t}" for h, t in DAY_TARGETS)) == DAY_TARGETS


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("0:500,2", "'2' is not HOUR:TARGET"),
        ("0:500,x:800", "'x:800' is not HOUR:TARGET"),
        ("1:500,2:800", "start at 0 and rise"),
        ("0:500,3:800,3:300", "start at 0 and rise"),
        ("0:500,1:0", "above 0"),
    ],
)
def test_a_bad_schedule_is_refused_with_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_targets(text)


def test_the_bench_stops_on_a_bad_schedule_with_what_is_wrong() -> None:
    """Read at the bench's start: one line on stderr and a failing exit, no
    traceback."""
    env = {**os.environ, "MARKET_DAY_TARGETS": "0:500,6"}
    done = subprocess.run(
        [sys.executable, "-c", "import bench.market_day._truth"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.strip() == "MARKET_DAY_TARGETS: '6' is not HOUR:TARGET"
