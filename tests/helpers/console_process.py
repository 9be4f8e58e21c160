"""`fleet-agent console` as a process, for the tests of how the console starts
and what transport it serves: its environment (`console_env`), its command
line bound on every address (`console_argv`), and `stop`, which sends Ctrl-C
as an operator would and returns what it printed."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path


def console_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CONSOLE_", "FLEET_ENV"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env["FLEET_DATABASE_URL"] = f"sqlite:///{tmp_path}/none.db"
    return env | extra


def console_argv(port: int, *transport: str) -> list[str]:
    """`fleet-agent console` on every address; plain http unless `transport`
    says otherwise (the TLS rules: tests/console/test_console_tls.py)."""
    code = "from starter.cli import main; main()"
    argv = [sys.executable, "-c", code, "console", "--host", "0.0.0.0", "--port", str(port)]
    return argv + list(transport or ["--insecure-http"])


async def stop(proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
    """Ctrl-C, as an operator stops it; killed if it does not stop."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
    try:
        return await asyncio.wait_for(proc.communicate(), timeout=30)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
