"""What a hung test was waiting for: the pending asyncio tasks' stacks.

pytest-timeout (pyproject.toml) ends a hung test and prints every thread's
stack, but an asyncio test's main thread only shows its event loop waiting:
what hangs is a task. Shortly before that limit, this prints every pending
task's chain of awaits to the terminal (past pytest's capture, so that an
xdist worker's dump is seen too).
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import pytest

__all__ = ["awaits_of", "dump_pending_tasks", "tasks_dumped_before"]

#: How long before pytest-timeout's limit the tasks are printed.
LEAD_SECONDS = 20.0


def awaits_of(coro: Any) -> Iterator[FrameType]:
    """The frames of a coroutine and of what it awaits, outermost first."""
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            yield frame
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)


def dump_pending_tasks(config: pytest.Config, test: str, fd: int = 2) -> None:
    """Print every asyncio task not done, with where it waits, then every
    thread's stack, to `fd` (stderr). Tasks are found through the garbage
    collector: they may belong to another thread's loop."""
    tasks = [t for t in gc.get_objects() if isinstance(t, asyncio.Task) and not t.done()]
    lines = [f"\n=== {test} still runs; {len(tasks)} pending asyncio tasks ==="]
    for task in tasks:
        lines.append(f"--- {task.get_name()}")
        lines.extend(
            f"    {f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}"
            for f in awaits_of(task.get_coro())
        )
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    try:
        os.write(fd, ("\n".join(lines) + "\n=== its threads ===\n").encode())
        faulthandler.dump_traceback(file=fd, all_threads=True)
    finally:
        if capture is not None:
            capture.resume_global_capture()


@contextmanager
def tasks_dumped_before(config: pytest.Config, test: str) -> Iterator[None]:
    """Dump the pending tasks if the body outlasts pytest-timeout's limit
    less LEAD_SECONDS."""
    timeout = float(config.getini("timeout") or 0)
    if timeout <= LEAD_SECONDS:
        yield
        return
    timer = threading.Timer(timeout - LEAD_SECONDS, dump_pending_tasks, args=(config, test))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
