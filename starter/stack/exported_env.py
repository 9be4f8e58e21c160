"""Variables the local stack exports to its in-process worker while it runs.

The simulator's (starter/stack/sim.py), the demand's (starter/stack/demand.py)
and the Snark Market's (starter/stack/market.py) each export theirs here and
get the environment back as it was when they stop.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

__all__ = ["exported_env"]


@contextlib.contextmanager
def exported_env(values: dict[str, str]) -> Iterator[None]:
    """Set `values` in this process's environment (the worker's settings read
    them), then put back exactly those keys as they were: only these, so
    what else the stack sets meanwhile stays."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
