"""What a local stack's ports hold, and which `fleet-agent up` owns the stack.

Two collisions `up` must not walk into:

- A port held by some other program. `probe_temporal` tells a Temporal
  frontend (it answers the SDK's connect) from anything else within a few
  seconds, so `up` names the port and the variable to change instead of
  retrying a connect that can never work.
- A second `up` of the same stack. The running one holds an exclusive lock
  (flock) on `var/stack-<port>.json` for its whole life and writes its pid and
  addresses there. The kernel drops the lock when the process ends, however it
  ends (a SIGKILL included), so a stale file never looks alive and no pid can
  be mistaken for a recycled one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pydantic import BaseModel, ValidationError
from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig

from starter.agent_client import CliError, open_client

__all__ = [
    "PROBE_TIMEOUT",
    "OwnedStack",
    "StackRecord",
    "claim_stack",
    "new_record",
    "port_taken",
    "probe_temporal",
]

# A Temporal frontend answers the SDK's connect (GetSystemInfo) in
# milliseconds; an HTTP server fails it at once (an h2 protocol error); a
# listener that never answers is given this long.
PROBE_TIMEOUT = 5.0


def port_taken(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on host:port (a blocking
    connect to the local host: it answers or refuses at once)."""
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0


async def probe_temporal(host: str, port: int, namespace: str, variable: str) -> Client:
    """Connect to the Temporal server listening on host:port.

    Raises `CliError` naming the port and `variable` (the setting that moves
    it) when what listens there is not a Temporal frontend.
    """
    try:
        # A runtime of its own: the process's default is the metrics' to set
        # (runtime/telemetry.py), and it can only be set before first use.
        return await open_client(
            f"{host}:{port}",
            namespace,
            connect_timeout=PROBE_TIMEOUT,
            runtime=Runtime(telemetry=TelemetryConfig()),
        )
    except CliError as exc:
        raise CliError(
            f"port {port} is in use by a program that is not a Temporal server ({exc}). "
            f"Stop that program, or run the stack on another port: set {variable}, "
            f"e.g. `make run {variable}={_suggest(port)}`"
        ) from None


def _suggest(port: int) -> int:
    return port + 100 if port + 100 <= 65535 else port - 100


class StackRecord(BaseModel):
    """What the running `up` says about itself in its stack file."""

    pid: int
    started_at: datetime
    temporal_address: str
    namespace: str
    ui_url: str = ""
    console_port: int | None = None
    agent_id: str = ""
    task_queue: str = ""
    #: The simulator the worker uses (None: vast.ai or no fleet); an added
    #: worker uses the same one.
    sim_url: str | None = None
    #: The simulator's demand endpoint when it serves demand (`--sim-demand`);
    #: an added worker reads it too, as the stack's does.
    demand_url: str | None = None
    #: The Curio stand-in's origin when the simulator runs the Snark Market
    #: (`--sim-demand` off router mode); an added worker reads it too.
    curio_url: str | None = None
    #: The store, its password masked: shown, never used to connect.
    store: str = ""
    ready: bool = False


@dataclass
class OwnedStack:
    """The stack file, locked by this process until `release`."""

    path: Path
    _file: IO[str]

    def write(self, record: StackRecord) -> None:
        """Replace the file's content (the lock stays held)."""
        self._file.seek(0)
        self._file.truncate()
        self._file.write(record.model_dump_json(indent=2))
        self._file.flush()

    def release(self) -> None:
        """Empty the file and drop the lock. The file stays: unlinking it while
        another `up` waits on the old inode would let two processes own it."""
        with contextlib.suppress(OSError):
            self._file.seek(0)
            self._file.truncate()
            self._file.flush()
        self._file.close()


def claim_stack(path: Path) -> OwnedStack | StackRecord | None:
    """Lock the stack file at `path` for this process, or find who holds it.

    Returns the `OwnedStack` when no live `up` holds it; the owner's
    `StackRecord` when one does; None when one does but has not written its
    record yet (it is starting).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # Python opens files non-inheritable (PEP 446): the dev server we start
    # does not get the descriptor, so it never holds the lock after we are gone.
    file = path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        file.seek(0)
        text = file.read()
        file.close()
        try:
            return StackRecord.model_validate_json(text)
        except ValidationError:
            return None
    return OwnedStack(path, file)


def new_record(address: str, namespace: str, **fields: object) -> StackRecord:
    """A record of this process, started now."""
    return StackRecord.model_validate(
        {
            "pid": os.getpid(),
            "started_at": datetime.now(UTC),
            "temporal_address": address,
            "namespace": namespace,
            **fields,
        }
    )
