"""The short chaos suite, as `make test` runs it: real processes, real faults.

`python -m bench.perf.chaos --quick --together` SIGKILLs a worker in the middle of an LLM call and
cuts the store off for 15 s, each in a world of its own (the two at once) (dev server and
workers as processes, PostgreSQL behind a proxy), and checks the invariants:
no duplicate rental, no runs in parallel, every operator message in exactly
one run, every run recorded, recovery within 45 s of a worker kill.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.devserver
@pytest.mark.postgres
async def test_quick_chaos_holds_every_invariant(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.perf.chaos",
        "--quick",
        "--together",
        "--outage",
        "15",
        "--json-out",
        str(out),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    printed, _ = await asyncio.wait_for(proc.communicate(), timeout=420)
    text = printed.decode()[-4000:]
    assert proc.returncode == 0, text
    outcomes = {o["scenario"]: o for o in json.loads(out.read_text())["outcomes"]}
    assert set(outcomes) == {"worker-kill-mid-llm", "store-outage"}
    for o in outcomes.values():
        assert o["passed"], (o, text)
        assert o["duplicate_rentals"] == o["lost_messages"] == o["unrecorded_runs"] == 0
        assert o["max_parallel_runs"] == 1 and o["runs"] >= 2
    assert outcomes["worker-kill-mid-llm"]["recovery_s"] <= 45
