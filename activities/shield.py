"""Finish a step that must not be cut in half, even when the activity is cancelled.

Temporal cancels an attempt that missed its heartbeat timeout (or whose run
was cancelled). Most steps may stop anywhere: the next attempt starts over.
A rental may not: once the request is on its way to vast.ai, the machine may
exist, and only the code that sent it can settle its label and record what
happened. `finish_despite_cancellation` runs such a step to its end and only
then lets the cancellation through.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["finish_despite_cancellation"]

T = TypeVar("T")


async def finish_despite_cancellation(step: Coroutine[Any, Any, T]) -> T:
    """Await `step` to its end; if the caller was cancelled meanwhile, raise
    `CancelledError` afterwards (the step's own error, if any, wins)."""
    task = asyncio.ensure_future(step)
    cancelled = False
    while not task.done():
        try:
            # Unlike awaiting the task, wait() leaves it running when we are cancelled.
            await asyncio.wait({task})
        except asyncio.CancelledError:
            cancelled = True
    result = task.result()
    if cancelled:
        raise asyncio.CancelledError
    return result
