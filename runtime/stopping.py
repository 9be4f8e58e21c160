"""Stop a long-running command on Ctrl-C or SIGTERM, whoever started it.

The handlers are installed on the running loop, not inherited: a shell
starts a background job with SIGINT ignored (and Python then leaves it so),
and SIGTERM's default ends the process at once, without a shutdown. `up`
and `python worker.py` both stop through here.
"""

from __future__ import annotations

import asyncio
import signal
import threading

__all__ = ["STOP_SIGNALS", "stop_event"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def stop_event() -> asyncio.Event:
    """An event the running loop sets on SIGINT or SIGTERM; the handlers last
    as long as the loop. Off the main thread (a program that runs the worker
    or the stack in a thread of its own) nothing is installed: signals go to
    the main thread, and that program stops us."""
    stop = asyncio.Event()
    if threading.current_thread() is not threading.main_thread():
        return stop
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    return stop
