"""Give the C allocator's free memory back to the system (glibc's ``malloc_trim``).

gRPC core receives each 50-200 MB request into many small buffers on its
own threads, and frees them once Python has the message as one bytes
object; glibc keeps such freed memory in its arenas, so the router's RSS
stayed ~1.5 times the inputs it holds with nothing of Python's using the
rest (bench/perf/router_memory.py). ``malloc_trim(0)`` returns those free
pages. On a system without glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["release_free_memory"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_memory() -> bool:
    """Return the allocator's free pages to the system; False if it cannot."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
