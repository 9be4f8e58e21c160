"""`python worker.py` as a child process, for the tests of what a real worker
process does: `Worker` starts one in its own process group and SIGKILLs it
(a worker killed mid-run), and `worker_stops` runs one with Temporal where
nothing listens and returns its exit code and stderr (a worker that refuses
to start)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]


class Worker:
    """`python worker.py` in its own process group."""

    def __init__(self, env: dict[str, str], log: IO[bytes]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "worker.py")],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL: gone in the middle of whatever it does, with no goodbye."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


async def worker_stops(tmp_path: Path, **extra: str) -> tuple[int | None, str]:
    """`python worker.py` in `tmp_path`, without our variables but `extra`,
    Temporal at a port where nothing listens: its exit code and stderr."""
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("FLEET_", "ANTHROPIC_", "VAST_", "METRICS_", "TEMPORAL_"))
        },
        "PYTHONPATH": str(ROOT),
        "TEMPORAL_ADDRESS": "127.0.0.1:9",  # discard: nothing listens
        **extra,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "worker.py"),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return proc.returncode, err.decode()
