"""Client-side pacing: each vast.ai endpoint's documented limit, kept by the client.

vast.ai limits requests per endpoint and identity (API key and client IP) as a
minimum interval between two requests, some endpoints also as a number of
calls per period, and answers 429 without a Retry-After header
(docs: ``api-reference/rate-limits-and-errors.mdx``; the figures are the
``x-rate-limit`` entries of the endpoints' openapi files):

=========  =================================  ==============================
endpoint   request                            limit
=========  =================================  ==============================
search     ``POST /api/v0/bundles/``          10 per minute
create     ``PUT /api/v0/asks/{id}/``         4.5 s apart; 12 s penalty after a 429
list       ``GET /api/v1/instances/``         1 s apart
show       ``GET /api/v0/instances/{id}/``    2 s apart
destroy    ``DELETE /api/v0/instances/{id}/`` 3 s apart
=========  =================================  ==============================

A `Pacer` hands out request slots per endpoint in the order they are asked
for, so concurrent callers (every activity of one worker shares its
`VastClient`) queue instead of provoking 429s. After a 429 the endpoint is
blocked for everyone until its penalty has passed, and the refused request
waits at least that long before it tries again. Pure asyncio and a clock:
nothing here touches the network.
"""

from __future__ import annotations

import asyncio
import random
import re
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Literal

__all__ = [
    "DOCUMENTED",
    "NO_PACING",
    "Endpoint",
    "Pace",
    "Pacer",
    "Pacing",
    "endpoint_of",
]

Endpoint = Literal["search", "create", "list", "show", "destroy", "catalogue", "other"]

# Added to every penalty: the service's clock starts when it refuses, ours when
# the answer arrives, and requests take time to travel.
_PENALTY_MARGIN_S = 0.5
# Added to every minimum interval, for the same reason: the service measures
# from when it admits a request, and one sent on time behind a request that
# was slow on its way arrives too soon. Without it, walking the instance list
# page by page drew a 429 every few seconds under load (bench/perf/fleets.py).
_INTERVAL_MARGIN_S = 0.1
_ID = re.compile(r"/\d+(?=/|$)")


@dataclass(frozen=True, slots=True)
class Pace:
    """The limit of one endpoint."""

    interval_s: float = 0.0  # at least this long between two requests
    penalty_s: float = 0.0  # the service refuses this long after a 429
    per_window: int = 0  # at most this many requests per `window_s` (0: no such limit)
    window_s: float = 0.0

    def scaled(self, factor: float) -> Pace:
        return replace(
            self,
            interval_s=self.interval_s * factor,
            penalty_s=self.penalty_s * factor,
            window_s=self.window_s * factor,
        )


@dataclass(frozen=True, slots=True)
class Pacing:
    """The limits a client keeps, per endpoint (`other`: any request not listed).

    `penalty_margin_s` is added to every penalty (see `Pacer.refused`),
    `interval_margin_s` to every minimum interval."""

    search: Pace
    create: Pace
    list: Pace
    show: Pace
    destroy: Pace
    catalogue: Pace
    other: Pace
    penalty_margin_s: float = _PENALTY_MARGIN_S
    interval_margin_s: float = _INTERVAL_MARGIN_S

    def pace(self, endpoint: Endpoint) -> Pace:
        result: Pace = getattr(self, endpoint)
        return result

    def scaled(self, factor: float) -> Pacing:
        """Every interval, window and penalty times `factor` (tests run at 1 %)."""
        if factor < 0:
            raise ValueError("a pacing factor must be >= 0")
        return Pacing(
            search=self.search.scaled(factor),
            create=self.create.scaled(factor),
            list=self.list.scaled(factor),
            show=self.show.scaled(factor),
            destroy=self.destroy.scaled(factor),
            catalogue=self.catalogue.scaled(factor),
            other=self.other.scaled(factor),
            penalty_margin_s=self.penalty_margin_s * factor,
            interval_margin_s=self.interval_margin_s * factor,
        )


#: vast.ai's documented limits (module docstring). Endpoints without a
#: documented penalty are assumed to refuse for one interval after a 429, the
#: search for one window's share (60 s / 10). The GPU catalogue is public and
#: cached, asked at most once a second; any other request once a second.
DOCUMENTED = Pacing(
    search=Pace(penalty_s=6.0, per_window=10, window_s=60.0),
    create=Pace(interval_s=4.5, penalty_s=12.0),
    list=Pace(interval_s=1.0, penalty_s=1.0),
    show=Pace(interval_s=2.0, penalty_s=2.0),
    destroy=Pace(interval_s=3.0, penalty_s=3.0),
    catalogue=Pace(interval_s=1.0, penalty_s=1.0),
    other=Pace(interval_s=1.0, penalty_s=1.0),
)

#: No pacing at all: for a local simulator without rate limits, and tests.
NO_PACING = DOCUMENTED.scaled(0.0)


def endpoint_of(method: str, path: str) -> tuple[Endpoint, str]:
    """The endpoint a request belongs to, and the key its limit is kept under.

    Known endpoints are keyed by name; any other request by its method and
    path with ids replaced (``GET /api/v0/things/{id}/``), so each keeps its own
    budget as the service's per-endpoint limits do.
    """
    method = method.upper()
    path = path if path.endswith("/") else path + "/"
    template = _ID.sub("/{id}", path.rstrip("/")) + "/"
    known: dict[tuple[str, str], Endpoint] = {
        ("POST", "/api/v0/bundles/"): "search",
        ("GET", "/api/v0/bundles/"): "search",
        ("PUT", "/api/v0/asks/{id}/"): "create",
        ("GET", "/api/v1/instances/"): "list",
        ("GET", "/api/v0/instances/{id}/"): "show",
        ("DELETE", "/api/v0/instances/{id}/"): "destroy",
        ("GET", "/api/v0/gpu_names/unique/"): "catalogue",
    }
    name = known.get((method, template))
    if name is not None:
        return name, name
    return "other", f"{method} {template}"


@dataclass
class _Lane:
    """The state of one endpoint: next free slot, recent slots, blocked until."""

    next_free: float = 0.0
    blocked_until: float = 0.0
    recent: deque[float] = field(default_factory=deque)


class Pacer:
    """Slots per endpoint, shared by every caller of one client (one API key).

    `clock` and `sleep` are injectable so the order and spacing of slots can
    be tested without waiting. The bookkeeping takes a thread lock, so one
    pacer may also serve callers on several event loops.
    """

    def __init__(
        self,
        pacing: Pacing = DOCUMENTED,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.pacing = pacing
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lanes: dict[str, _Lane] = {}
        self._lock = threading.Lock()

    async def wait(self, method: str, path: str) -> float:
        """Wait for this request's slot; returns the seconds waited.

        A slot is reserved in order of asking. If a 429 blocked the endpoint
        while this caller waited, it asks again behind the block.
        """
        endpoint, key = endpoint_of(method, path)
        pace = self.pacing.pace(endpoint)
        waited = 0.0
        while True:
            now = self._clock()
            slot = self._reserve(key, pace, now, self.pacing.interval_margin_s)
            if slot > now:
                await self._sleep(slot - now)
                waited += slot - now
            with self._lock:
                blocked = self._lanes[key].blocked_until
            if blocked <= self._clock():
                return waited

    def refused(self, method: str, path: str, *, attempt: int, backoff_base: float) -> float:
        """After a 429: block the endpoint for every caller and return how long
        the refused request must wait before it is sent again.

        The delay outlasts the endpoint's penalty (plus a margin), grows
        exponentially with `attempt` from `backoff_base`, and is jittered
        upward only, so it is never shorter than the penalty.
        """
        endpoint, key = endpoint_of(method, path)
        pace = self.pacing.pace(endpoint)
        floor = pace.penalty_s + self.pacing.penalty_margin_s if pace.penalty_s > 0 else 0.0
        delay = max(floor, backoff_base * 2.0**attempt) * self._rng.uniform(1.0, 1.1)
        with self._lock:
            lane = self._lanes.setdefault(key, _Lane())
            until = self._clock() + delay
            lane.blocked_until = max(lane.blocked_until, until)
            lane.next_free = max(lane.next_free, until)
        return delay

    def _reserve(self, key: str, pace: Pace, now: float, margin: float) -> float:
        with self._lock:
            lane = self._lanes.setdefault(key, _Lane())
            slot = max(now, lane.next_free, lane.blocked_until)
            if pace.per_window > 0:
                while lane.recent and lane.recent[0] <= slot - pace.window_s:
                    lane.recent.popleft()
                if len(lane.recent) >= pace.per_window:
                    # The oldest slot still in the window must leave it first.
                    slot = max(slot, lane.recent[-pace.per_window] + pace.window_s)
                lane.recent.append(slot)
            lane.next_free = slot + pace.interval_s + (margin if pace.interval_s > 0 else 0.0)
            return slot
