"""Free TCP ports for the tests' own servers, which cannot be taken from under them.

A port from `bind(("127.0.0.1", 0))` comes out of the kernel's ephemeral
range (32768-60999 on Linux), the same range every outgoing connection's
local port comes from: between the test closing its probe socket and the
server binding it, another test's connection could take it (`up` then
stopped with "port ... is in use by another program"). These ports come
from below that range, from a slice of their own for each pytest-xdist
worker, handed out once each per process, and checked free by a bind.
"""

from __future__ import annotations

import itertools
import os
import random
import socket

__all__ = ["free_port"]

_FIRST = 20_000  # below the ephemeral range, above the well-known services
_SLICE = 3_000  # ports a worker may hand out: gw0 20000-22999, gw1 23000-25999, ...


def _slice() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 3
    start = _FIRST + (index % 4) * _SLICE
    return range(start, start + _SLICE)


_PORTS = _slice()
# A random start: two runs of the suite at once on one machine rarely meet.
_NEXT = itertools.count(random.randrange(len(_PORTS)))


def free_port() -> int:
    """A port nobody listens on now, not handed out before in this process."""
    for _ in range(len(_PORTS)):
        port = _PORTS[next(_NEXT) % len(_PORTS)]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in {_PORTS.start}-{_PORTS.stop - 1}")
