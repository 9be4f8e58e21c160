"""`fleet-agent sim`: rate limits on, state kept under var/ across restarts."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _banner(proc: subprocess.Popen[str], deadline: float) -> str:
    """The first line the simulator prints. It prints it just after it starts
    to answer: Ctrl-C sent between the two would stop it before the banner."""
    assert proc.stdout is not None
    while not select.select([proc.stdout], [], [], 0.1)[0]:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the simulator printed nothing"
    return proc.stdout.readline()


def _run_sim(cwd: Path, port: int) -> tuple[str, dict[str, Any]]:
    """Start `fleet-agent sim`, read its banner and its state once it answers,
    stop it with Ctrl-C."""
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
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return banner + out, state


def test_fleet_agent_sim_limits_requests_and_keeps_its_market(tmp_path: Path) -> None:
    out, state = _run_sim(tmp_path, _free_port())
    assert state["rate_limits"] is True and state["offers"] == 200
    assert "rate limits on" in out and "kept in var/sim-state.json" in out
    saved = tmp_path / "var" / "sim-state.json"
    assert saved.exists()
    again, restored = _run_sim(tmp_path, _free_port())
    assert "restored from var/sim-state.json" in again
    assert restored["now"] >= state["now"]  # it went on; it did not start over
