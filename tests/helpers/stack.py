"""`fleet-agent up` as a real process, for the tests of the local stack: the
environment of a fresh `make run` (`up_env`), an `up` started in a scratch
directory (`start_up`) and read line by line (`Up`), and the commands its
banner prints, as argv and the variables they set (`banner_command`)."""

from __future__ import annotations

import asyncio
import itertools
import os
import shlex
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def up_env(**extra: str) -> dict[str, str]:
    """The environment of a fresh `make run`: no keys, no stack settings."""
    drop = {
        "ANTHROPIC_API_KEY",
        "FLEET_LLM_PROVIDER",
        "VAST_API_KEY",
        "VAST_API_URL",
        "FLEET_DATABASE_URL",
        "TEMPORAL_ADDRESS",
        "TEMPORAL_PORT",
        "TEMPORAL_UI_PORT",
        "CONSOLE_PORT",
    }
    env = {k: v for k, v in os.environ.items() if k not in drop}
    # Tests run in parallel: each stack's console on a port of its own, no metrics.
    own = {"CONSOLE_PORT": str(free_port()), "METRICS_PORT": "off"}
    return env | {"PYTHONPATH": str(ROOT), **own, **extra}


UP = [sys.executable, "-c", "from starter.cli import main; main()", "up"]


@dataclass
class Up:
    """One `fleet-agent up` process and everything it printed so far."""

    proc: asyncio.subprocess.Process
    out: list[str]

    async def until(self, text: str, within: float = 40) -> None:
        """Read output until a line contains `text`."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(within):
            while not any(text in line for line in self.out):
                line = (await self.proc.stdout.readline()).decode()
                assert line, f"`up` ended before {text!r}: {''.join(self.out)}"
                self.out.append(line)

    async def finish(self, sig: signal.Signals | None = None, within: float = 40) -> int:
        """Send `sig` (if any), read the rest, and return the exit code."""
        if sig is not None and self.proc.returncode is None:
            self.proc.send_signal(sig)
        try:
            rest, err = await asyncio.wait_for(self.proc.communicate(), timeout=within)
        except TimeoutError:
            self.proc.kill()
            raise
        self.out += [rest.decode(), err.decode()]
        assert self.proc.returncode is not None
        return self.proc.returncode

    @property
    def text(self) -> str:
        return "".join(self.out)


async def start_up(cwd: Path, *args: str, env: dict[str, str] | None = None) -> Up:
    proc = await asyncio.create_subprocess_exec(
        *UP,
        *args,
        cwd=cwd,
        env=env or up_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return Up(proc, [])


def banner_command(text: str, verb: str) -> tuple[list[str], dict[str, str]]:
    """The `fleet-agent <verb>` line `up` printed under "try:", as argv and the
    variables it sets, run as the console script would be."""
    line = next((ln.strip() for ln in text.splitlines() if f"bin/fleet-agent {verb}" in ln), None)
    assert line, f"`up` printed no `fleet-agent {verb}` line: {text}"
    if "`" in line:  # a command quoted in a sentence (the watchdog's `cancel`)
        line = next(part for part in line.split("`") if f"bin/fleet-agent {verb}" in part)
    words = shlex.split(line)
    env = dict(w.split("=", 1) for w in itertools.takewhile(lambda w: "=" in w, words))
    rest = words[len(env) :]
    assert rest[0] == ".venv/bin/fleet-agent", line
    return [*UP[:-1], *rest[1:]], env
