"""One instance listing of the account, shared by every caller of a process.

``GET /api/v1/instances/`` lists the whole account (25 rows a page, pages 1 s
apart), and vast.ai documents no filter on a label prefix: every agent's view
of its own fleet costs a walk over every agent's machines. On one worker with
many agents, monitors and runs asking each on their own queue up behind the
endpoint's pacing (agents × pages every poll). `SharedListing` serves them
all from one walk:

* a listing is reused for `ttl_s` after its walk ended (its rows are at
  most the walk's duration older: a few paced pages);
* callers that arrive while a walk is under way wait for that walk
  (single-flight) instead of starting their own, however long it takes:
  a second walk would queue behind the first's pages in the pacing, and
  with walks longer than the TTL they would pile up (measured at 150
  agents, 6 pages a walk: every caller timed out);
* a write (create, destroy, any other mutating request) through the same
  client bumps a generation: a listing whose walk started before the write
  is neither reused nor joined afterwards, so whoever made a change sees it
  in the next listing it asks for.

Pure asyncio and a clock; the walk itself is the caller's (the client's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .models import Instance

__all__ = ["DEFAULT_LIST_TTL_S", "SharedListing"]

#: How long one listing serves everyone after its walk ended. Short: a monitor
#: polls every 30 s and a worker's own writes invalidate it, so a few seconds
#: lose nothing; long enough that the list endpoint (a page a second) keeps
#: room for the label look-ups of creates.
DEFAULT_LIST_TTL_S = 5.0


@dataclass(slots=True)
class _Walk:
    generation: int
    task: asyncio.Task[list[Instance]]
    finished: float | None = None  # set when the walk ends (clock time)


class SharedListing:
    """Every row of the account (destroyed ones included), from `fetch`,
    shared within `ttl_s` and across concurrent callers; `invalidate` after
    every write. One event loop: a walk in flight on another loop is not
    joined (it is simply not shared)."""

    def __init__(
        self,
        fetch: Callable[[], Awaitable[list[Instance]]],
        *,
        ttl_s: float = DEFAULT_LIST_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s < 0:
            raise ValueError("a listing TTL must be >= 0")
        self._fetch = fetch
        self._ttl_s = ttl_s
        self._clock = clock
        self._generation = 0
        self._last: _Walk | None = None  # the newest walk, done or under way
        #: Walks sent, and listings served from another caller's walk.
        self.walks = 0
        self.shared = 0

    def invalidate(self) -> None:
        """A write happened: no listing begun before now is served again."""
        self._generation += 1

    async def get(self) -> list[Instance]:
        """The account's rows: a fresh enough listing, the walk under way, or
        a new walk. A failed walk is not kept: the next caller walks again."""
        walk = self._last
        if walk is not None and self._usable(walk):
            self.shared += 1
        else:
            walk = _Walk(self._generation, asyncio.ensure_future(self._fetch()))
            walk.task.add_done_callback(self._ended(walk))
            self._last = walk
            self.walks += 1
        # Shielded: one caller's cancellation (its activity timed out) must
        # not cancel the walk the others wait on.
        rows = await asyncio.shield(walk.task)
        return list(rows)

    def _usable(self, walk: _Walk) -> bool:
        if self._ttl_s == 0 or walk.generation != self._generation:
            return False
        if walk.task.get_loop() is not asyncio.get_running_loop():
            return False
        if not walk.task.done():
            return True  # under way: join it
        # A failed or cancelled walk is not served; a good one for `ttl_s`.
        if walk.task.cancelled() or walk.task.exception() is not None:
            return False
        return walk.finished is not None and self._clock() - walk.finished < self._ttl_s

    def _ended(self, walk: _Walk) -> Callable[[asyncio.Task[list[Instance]]], None]:
        def done(task: asyncio.Task[list[Instance]]) -> None:
            walk.finished = self._clock()
            # Its failure is raised to every caller; this keeps asyncio from
            # logging it as never retrieved when every caller was cancelled.
            if not task.cancelled():
                task.exception()

        return done
