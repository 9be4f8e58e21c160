"""`fleet-agent sim`: rate limits on, state kept under var/ across restarts."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import as_background_job
from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def _banner(proc: subprocess.Popen[str], deadline: float) -> str:
    """The first line the simulator prints. It prints it just after it starts
    to answer: Ctrl-C sent between the two would stop it before the banner."""
    assert proc.stdout is not None
    while not select.select([proc.stdout], [], [], 0.1)[0]:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the simulator printed nothing"
    return proc.stdout.readline()


def _run_sim(
    cwd: Path, port: int, stop: signal.Signals = signal.SIGINT, *, background: bool = False
) -> tuple[str, dict[str, Any]]:
    """Start `fleet-agent sim`, read its banner and its state once it answers,
    stop it with `stop` (Ctrl-C by default)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from starter.cli import main; main()",
            "sim",
            "--port",
            str(port),
            "--offers",
            "200",
        ],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_background_job if background else None,
    )
    try:
        deadline = time.monotonic() + 30
        banner = _banner(proc, deadline)
        while True:
            try:
                state = httpx.get(f"http://127.0.0.1:{port}/_sim/state", timeout=2).json()
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the simulator never answered"
                time.sleep(0.1)
    finally:
        proc.send_signal(stop)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError(f"the simulator did not stop on {stop.name}") from None
    assert proc.returncode == 0, err
    return banner + out, state


def test_fleet_agent_sim_limits_requests_and_keeps_its_market(tmp_path: Path) -> None:
    out, state = _run_sim(tmp_path, free_port())
    assert state["rate_limits"] is True and state["offers"] == 200
    assert "rate limits on" in out and "kept in var/sim-state.json" in out
    saved = tmp_path / "var" / "sim-state.json"
    assert saved.exists()
    again, restored = _run_sim(tmp_path, free_port())
    assert "restored from var/sim-state.json" in again
    assert restored["now"] >= state["now"]  # it went on; it did not start over


def test_sigterm_and_a_background_ctrl_c_stop_it_and_keep_its_market(tmp_path: Path) -> None:
    """Started as a background job (SIGINT ignored, inherited), Ctrl-C still
    stops it; so does SIGTERM. Exit code 0 (`_run_sim` checks it) means the
    stop went through the simulator's own stop, which saves the market: the
    default SIGTERM would end it with -15, unsaved since the last periodic
    save."""
    out, state = _run_sim(tmp_path, free_port(), background=True)
    assert "kept in var/sim-state.json" in out
    again, restored = _run_sim(tmp_path, free_port(), signal.SIGTERM)
    assert "restored from var/sim-state.json" in again
    assert restored["now"] >= state["now"]
    third, last = _run_sim(tmp_path, free_port())
    assert "restored from var/sim-state.json" in third
    assert last["now"] >= restored["now"]  # the file left by SIGTERM restores
