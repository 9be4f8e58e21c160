"""The simulator's own clock: real time times `speed`, plus manual jumps.

``now() = start_epoch + jumped + real_elapsed * speed``. With ``speed=0`` the
clock only moves when a test calls `advance`, which makes runs reproducible;
with ``speed=60`` an hour of market passes in a real minute for a demo. Both
can be combined.
"""

from __future__ import annotations

import threading
import time

__all__ = ["SimClock"]


class SimClock:
    """A thread-safe scalable clock in Unix seconds."""

    def __init__(self, *, speed: float = 1.0, start_epoch: float | None = None) -> None:
        if speed < 0:
            raise ValueError("speed must be >= 0")
        self._lock = threading.Lock()
        self._speed = float(speed)
        # Sim time at the last re-anchor, and the real monotonic time it happened.
        self._base = float(start_epoch if start_epoch is not None else time.time())
        self._anchor = time.monotonic()

    @property
    def speed(self) -> float:
        """Sim seconds per real second."""
        with self._lock:
            return self._speed

    def now(self) -> float:
        """Current sim time (Unix seconds)."""
        with self._lock:
            return self._now_locked()

    def advance(self, seconds: float) -> float:
        """Jump forward by `seconds` of sim time; returns the new time."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        with self._lock:
            self._rebase_locked()
            self._base += float(seconds)
            return self._base

    def set_speed(self, speed: float) -> None:
        """Change the rate from now on (0 freezes the clock between `advance` calls)."""
        if speed < 0:
            raise ValueError("speed must be >= 0")
        with self._lock:
            self._rebase_locked()
            self._speed = float(speed)

    def restore(self, now: float, speed: float) -> None:
        """Continue from a saved sim time `now` at `speed` (a restarted simulator)."""
        if speed < 0:
            raise ValueError("speed must be >= 0")
        with self._lock:
            self._base = float(now)
            self._anchor = time.monotonic()
            self._speed = float(speed)

    def _now_locked(self) -> float:
        return self._base + (time.monotonic() - self._anchor) * self._speed

    def _rebase_locked(self) -> None:
        # Fold the real time elapsed so far into the base, so a speed change
        # or a jump never moves earlier time.
        self._base = self._now_locked()
        self._anchor = time.monotonic()
