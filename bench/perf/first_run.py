"""How long a fresh clone takes from `make run` to the agent's first finished run.

Clones the repository (its committed HEAD) into a temporary folder, runs
`make run` there on free ports (TEMPORAL_PORT/TEMPORAL_UI_PORT, so it never
meets a stack already running on this machine), with no API keys (autopilot
and the simulator), and times:

- install: `make run` starting until make echoes the `fleet-agent up` line
  (venv, uv or pip, the package and the `temporal` binary);
- up: until `up` prints "agent started" (dev server, simulator, worker);
- first run: until the stack's store has a finished run (read with sqlite3:
  no client to start). If none comes on its own within `--trigger-after`
  seconds, one is asked for with `fleet-agent trigger`.

Then it stops the stack with SIGINT to the whole process group, as Ctrl-C in
a terminal would, and checks that it stopped cleanly: `up` said "stopping…",
make ended (by the SIGINT, as make does, or 0) and nothing listens on the
Temporal port any more. Caches: `--cold` sets PIP_NO_CACHE_DIR=1 and UV_NO_CACHE=1, so every
package is downloaded; without it pip's and uv's caches are used as they are
(the JSON says which, and whether the cache folders existed beforehand).

    .venv/bin/python -m bench.perf.first_run            # warm caches
    .venv/bin/python -m bench.perf.first_run --cold     # nothing from the caches
    .venv/bin/python -m bench.perf.first_run --pip      # USE_UV=0: pip only
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from bench import _common

ROOT = _common.ROOT
UP_LINE = ".venv/bin/fleet-agent up"
STARTED = "agent started"
TARGET_SECONDS = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Lines:
    """The output of `make run`, each line with the time it arrived."""

    def __init__(self, stream: IO[bytes], start: float, echo: bool) -> None:
        self.seen: list[tuple[float, str]] = []
        self._start = start
        self._echo = echo
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            self.seen.append((time.monotonic() - self._start, line))
            if self._echo:
                print(f"  | {line}", flush=True)

    def when(self, text: str) -> float | None:
        return next((t for t, line in self.seen if text in line), None)

    def text(self) -> str:
        return "\n".join(line for _, line in self.seen)


def first_finished_run(store: Path) -> bool:
    """Whether the store has a finished run (read-only: the stack owns the file)."""
    if not store.exists():
        return False
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as db:
            row = db.execute("SELECT count(*) FROM fa_runs WHERE ended_at IS NOT NULL").fetchone()
    except sqlite3.Error:
        return False  # not created yet, or mid-migration
    return bool(row and row[0])


def wait_for(probe: Any, deadline: float, proc: subprocess.Popen[bytes]) -> bool:
    while time.monotonic() < deadline:
        if probe():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False


def run_once(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    clone = workdir / "fleet-agent"
    t0 = time.monotonic()
    subprocess.run(["git", "clone", "--quiet", str(args.source), str(clone)], check=True)
    t_clone = time.monotonic() - t0
    port, ui_port = free_port(), free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"ANTHROPIC_API_KEY", "VAST_API_KEY", "VAST_API_URL", "FLEET_DATABASE_URL"}
        and not k.startswith(("TEMPORAL_", "VIRTUAL_ENV"))
    }
    if args.cold:
        env |= {"PIP_NO_CACHE_DIR": "1", "UV_NO_CACHE": "1"}
    make = [
        "make",
        "run",
        f"TEMPORAL_PORT={port}",
        f"TEMPORAL_UI_PORT={ui_port}",
        f"USE_UV={0 if args.pip else 1}",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.Popen(
        make,
        cwd=clone,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # SIGINT to the group, as Ctrl-C in a terminal
    )
    assert proc.stdout is not None
    lines = Lines(proc.stdout, start, args.verbose)
    store = clone / "var" / f"stack-{port}" / "fleet-agent.db"
    deadline = start + args.timeout
    triggered = False
    try:
        up = wait_for(lambda: lines.when(STARTED) is not None, deadline, proc)
        if up:
            soon = min(deadline, time.monotonic() + args.trigger_after)
            got = wait_for(lambda: first_finished_run(store), soon, proc)
            if not got:
                triggered = True
                subprocess.run(
                    [".venv/bin/fleet-agent", "trigger"],
                    cwd=clone,
                    env=env | {"TEMPORAL_PORT": str(port)},
                    capture_output=True,
                    check=False,
                )
                got = wait_for(lambda: first_finished_run(store), deadline, proc)
        t_first = time.monotonic() - start if up and got else None
    finally:
        stop_start = time.monotonic()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
        t_stop = time.monotonic() - stop_start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of make and everything under it (each process is waited for by its
    # parent, so its time rolls up): a figure a busy machine does not inflate.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with socket.socket() as s:
        port_free = s.connect_ex(("127.0.0.1", port)) != 0
    installed = lines.when(UP_LINE)
    started = lines.when(STARTED)
    if t_first is None:
        print(lines.text()[-3000:], file=sys.stderr)
    return {
        "clone_s": round(t_clone, 2),
        "install_s": None if installed is None else round(installed, 2),
        "up_s": None if started is None or installed is None else round(started - installed, 2),
        "agent_started_s": None if started is None else round(started, 2),
        "first_run_s": None if t_first is None else round(t_first, 2),
        "first_run_asked_for": triggered,
        "stop_s": round(t_stop, 2),
        "cpu_s": round(cpu, 2),
        "exit_code": code,
        "stopped_cleanly": code in (0, -signal.SIGINT)
        and lines.when("stopping") is not None
        and port_free,
        "installer": "uv" if (clone / ".venv" / "bin" / "uv").exists() else "pip",
        "installed_dev_tools": any(
            (clone / ".venv" / "bin" / tool).exists() for tool in ("mypy", "ruff", "pytest")
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--source", default=str(ROOT), help="repository to clone (default: this)")
    parser.add_argument("--cold", action="store_true", help="no pip or uv cache")
    parser.add_argument("--pip", action="store_true", help="USE_UV=0: install with pip only")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after (s)")
    parser.add_argument("--trigger-after", type=float, default=20.0, help=argparse.SUPPRESS)
    parser.add_argument("--verbose", action="store_true", help="echo make's output")
    parser.add_argument("--json-out", type=Path, help="default bench/results/first_run-<time>.json")
    args = parser.parse_args()
    home = Path.home()
    caches = {
        "pip_cache_existed": (home / ".cache" / "pip").exists(),
        "uv_cache_existed": (home / ".cache" / "uv").exists(),
    }
    commit = subprocess.run(
        ["git", "-C", args.source, "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="first-run-") as tmp:
        result = run_once(args, Path(tmp))
    data = {
        "commit": commit,
        "python": sys.version.split()[0],
        "caches": "cold (PIP_NO_CACHE_DIR=1, UV_NO_CACHE=1)" if args.cold else "as found",
        **caches,
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        **result,
        "target_s": TARGET_SECONDS,
    }
    _common.print_table("make run on a fresh clone, to the first finished run", data)
    print(f"\nJSON: {_common.write_json('first_run', data, args.json_out)}")
    ok = result["first_run_s"] is not None and result["stopped_cleanly"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
