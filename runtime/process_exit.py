"""Ending a process that used the Temporal SDK, without the interpreter's
finalization.

The SDK's native threads can abort a process while the interpreter
finalizes (temporalio/sdk-python#300: "PyGILState_Release: thread state ...
must be current", SIGABRT), which turns a clean exit, or a clean refusal,
into exit status -6. A command whose work is done flushes what it printed
and ends the process at once. Everything it owns must be closed by then.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import NoReturn

__all__ = ["end_process"]


def end_process(code: int) -> NoReturn:
    """Flush stdout, stderr and the logging handlers, then exit with `code`."""
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    with contextlib.suppress(BrokenPipeError):
        sys.stderr.flush()
    logging.shutdown()
    os._exit(code)
