"""The market's time: a deterministic event queue on the simulator's clock.

Touches nothing but its own heap. Events run in time order, and events at
the same time in the order they were scheduled, so a seed and a sequence of
calls give one history; `run_until` runs every event up to a time, so
stepping the clock in one jump of an hour or in 3,600 jumps of a second runs
the same events with the same results.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

__all__ = ["Scheduler"]


class Scheduler:
    """Events at sim times (Unix seconds); `now` is the time being processed."""

    def __init__(self, start: float) -> None:
        self.now = float(start)
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()

    def at(self, t: float, action: Callable[[], None]) -> None:
        """Run `action` at `t` (now, if `t` has passed)."""
        heapq.heappush(self._heap, (max(float(t), self.now), next(self._seq), action))

    def after(self, seconds: float, action: Callable[[], None]) -> None:
        """Run `action` `seconds` from now."""
        self.at(self.now + seconds, action)

    def every(
        self, period: float, action: Callable[[], None], *, first: float | None = None
    ) -> None:
        """Run `action` at `first` (default: one period from now), then every `period`."""

        def tick() -> None:
            action()
            self.after(period, tick)

        self.at(self.now + period if first is None else first, tick)

    def next_time(self) -> float | None:
        """When the next event is due (None: nothing scheduled)."""
        return self._heap[0][0] if self._heap else None

    def run_until(self, t: float) -> int:
        """Run every event due at or before `t`, then stand at `t`; returns
        how many ran. A time before `now` runs nothing."""
        ran = 0
        while self._heap and self._heap[0][0] <= t:
            when, _, action = heapq.heappop(self._heap)
            self.now = when
            action()
            ran += 1
        self.now = max(self.now, float(t))
        return ran
