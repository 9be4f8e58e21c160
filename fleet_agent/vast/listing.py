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
  with walks longer than the TTL they would pile up until every caller
  times out ("Listing" in bench/results/2026-12-07-autopilot-rule-cases.md);
* a write (create, destroy, any other mutating request) through the same
  client bumps a generation: a listing whose walk started before the write
  is neither reused nor joined afterwards, so whoever made a change sees it
  in the next listing it asks for;
* a caller that can take an older view (`stale_ok`: a run's context, the
  model's `get_fleet_status`) is served the newest good listing at once
  while it ended under `stale_s` ago, and a newer walk is started in the
  background once it is past `ttl_s`: at 100 agents a walk is 4 paced
  pages (4.4 s), and a run that joined it waited that long before its
  model call, holding up the messages that came meanwhile
  (docs/decisions/load-time.md, "A run's view does not wait for a walk"). Such a
  caller says how long ago its agent last changed its fleet
  (`changed_ago_s`, from the store, so a write by another worker counts):
  a listing whose walk began before then is not served to it.

Pure asyncio and a clock; the walk itself is the caller's (the client's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from .models import Instance

__all__ = ["DEFAULT_LIST_STALE_S", "DEFAULT_LIST_TTL_S", "SharedListing"]

#: How long one listing serves everyone after its walk ended. Short: a monitor
#: polls every 30 s and a worker's own writes invalidate it, so a few seconds
#: lose nothing; long enough that the list endpoint (a page a second) keeps
#: room for the label look-ups of creates.
DEFAULT_LIST_TTL_S = 5.0
#: How old (since its walk ended) a listing may be for a `stale_ok` caller.
#: The monitor's poll interval (30 s by default): the provers' figures in
#: the same view are as old as the last poll already.
DEFAULT_LIST_STALE_S = 30.0


@dataclass(slots=True)
class _Walk:
    generation: int
    task: asyncio.Task[list[Instance]]
    began: float  # clock time when the walk was sent
    finished: float | None = None  # set when the walk ends (clock time)


class SharedListing:
    """Every row of the account (destroyed ones included), from `fetch`,
    shared within `ttl_s` and across concurrent callers; `invalidate` after
    every write. One event loop: a walk in flight on another loop is not
    joined (it is simply not shared). `stale_s` 0 serves nothing stale."""

    def __init__(
        self,
        fetch: Callable[[], Awaitable[list[Instance]]],
        *,
        ttl_s: float = DEFAULT_LIST_TTL_S,
        stale_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s < 0 or stale_s < 0:
            raise ValueError("a listing TTL and staleness must be >= 0")
        self._fetch = fetch
        self._ttl_s = ttl_s
        self._stale_s = stale_s
        self._clock = clock
        self._generation = 0
        self._last: _Walk | None = None  # the newest walk, done or under way
        self._good: _Walk | None = None  # the newest walk that ended well
        #: Walks sent, listings served from another caller's walk, and those
        #: served stale (at once, from a walk that ended over `ttl_s` ago).
        self.walks = 0
        self.shared = 0
        self.stale = 0

    @property
    def serves_stale(self) -> bool:
        """Whether a `stale_ok` caller can ever be served an older listing."""
        return self._ttl_s > 0 and self._stale_s > 0

    def invalidate(self) -> None:
        """A write happened: no listing begun before now is served again."""
        self._generation += 1

    async def get(self) -> list[Instance]:
        """The account's rows: a fresh enough listing, the walk under way, or
        a new walk. A failed walk is not kept: the next caller walks again."""
        rows, _ = await self.view()
        return rows

    async def view(
        self, *, stale_ok: bool = False, changed_ago_s: float | None = None
    ) -> tuple[list[Instance], bool]:
        """The account's rows as `get` serves them, and whether they were
        served stale (from a walk that ended over `ttl_s` ago).

        `stale_ok`: the newest good listing, at once, while it ended under
        `stale_s` ago (a newer walk starts in the background past `ttl_s`).
        `changed_ago_s`: the caller's fleet changed that long ago, so no walk
        sent before then is served to it."""
        not_before = None if changed_ago_s is None else self._clock() - max(0.0, changed_ago_s)
        if stale_ok:
            served = self._stale(not_before)
            if served is not None:
                return served
        walk = self._last
        if walk is not None and self._usable(walk, not_before):
            self.shared += 1
        else:
            walk = self._start()
        # Shielded: one caller's cancellation (its activity timed out) must
        # not cancel the walk the others wait on.
        rows = await asyncio.shield(walk.task)
        return list(rows), False

    def _start(self) -> _Walk:
        walk = _Walk(self._generation, asyncio.ensure_future(self._fetch()), self._clock())
        walk.task.add_done_callback(self._ended(walk))
        self._last = walk
        self.walks += 1
        return walk

    def _stale(self, not_before: float | None) -> tuple[list[Instance], bool] | None:
        """The newest good listing for a `stale_ok` caller, or None (then it
        is served as any other caller)."""
        good = self._good
        if good is None or good.finished is None or not self._current(good, not_before):
            return None
        age = self._clock() - good.finished
        if age >= max(self._stale_s, self._ttl_s):
            return None
        stale = age >= self._ttl_s
        if stale:
            last = self._last
            if last is None or last.task.done() or last.generation != self._generation:
                self._start()  # a newer walk for whoever comes next; not awaited
            self.stale += 1
        else:
            self.shared += 1
        return list(good.task.result()), stale

    def _current(self, walk: _Walk, not_before: float | None) -> bool:
        """Sharing is on, no write came after `walk` began (this client's, or
        the caller's `not_before`), and it runs on this event loop."""
        return (
            self._ttl_s > 0
            and walk.generation == self._generation
            and (not_before is None or walk.began >= not_before)
            and walk.task.get_loop() is asyncio.get_running_loop()
        )

    def _usable(self, walk: _Walk, not_before: float | None = None) -> bool:
        if not self._current(walk, not_before):
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
            # logging it as never retrieved when every caller was cancelled
            # (or when nobody waits: a background walk for stale callers).
            if task.cancelled() or task.exception() is not None:
                return
            good = self._good
            if good is None or good.began <= walk.began:
                self._good = walk

        return done
