"""Heartbeats for activities that wait on the network.

A worker killed with SIGKILL sends nothing more; Temporal notices only when an
attempt misses its `heartbeat_timeout` (see workflows/policies.py). Without a
heartbeat it waits out the whole start-to-close timeout, minutes for an LLM
call. `heartbeating()` beats from a background task while the body awaits,
so a hung request or a slow first token never looks like a dead worker, and
a dead worker is noticed within the heartbeat timeout.

The SDK throttles what it sends to the server (at most every 0.8 × the
heartbeat timeout), so beating every few seconds costs nothing extra.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio import activity

__all__ = ["HEARTBEAT_EVERY_SECONDS", "beat", "heartbeating"]

HEARTBEAT_EVERY_SECONDS = 5.0


def beat(*details: Any) -> None:
    """One heartbeat, when running inside an activity (a no-op in plain calls,
    so activity methods stay callable from unit tests)."""
    if activity.in_activity():
        activity.heartbeat(*details)


@contextlib.asynccontextmanager
async def heartbeating(
    every: float = HEARTBEAT_EVERY_SECONDS,
    details: Callable[[], tuple[Any, ...]] | None = None,
) -> AsyncIterator[None]:
    """Heartbeat every `every` seconds until the body ends.

    `details()` is called at each beat; what it returns becomes the heartbeat
    details, which the next attempt reads from `activity.info().heartbeat_details`.
    """
    if not activity.in_activity():
        yield
        return

    async def ticker() -> None:
        while True:
            beat(*(details() if details is not None else ()))
            await asyncio.sleep(every)

    task = asyncio.create_task(ticker())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
