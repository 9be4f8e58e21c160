"""vast.ai's documented rate limits, per endpoint and identity, in real seconds.

The service enforces "a minimum interval between requests for a given endpoint
and identity", some endpoints a number of calls per period, and the create
endpoint a penalty after a 429 (vast-ai/docs: ``api-reference/rate-limits-and-errors.mdx``
and each endpoint's ``x-rate-limit`` in ``api-reference/openapi/yaml/``):

* ``GET /api/v1/instances/`` (list): 1 request per 1.0 s
* ``GET /api/v0/instances/{id}/`` (show): 2.0 s
* ``DELETE /api/v0/instances/{id}/`` (destroy): 3.0 s
* ``PUT /api/v0/instances/{id}/`` (manage), ``PUT /api/v0/instances/reboot/{id}/``: 1.0 s
* ``PUT /api/v0/asks/{id}/`` (create): 4.5 s, and 12 s of penalty after a 429
* ``POST /api/v0/bundles/`` (search): 10 requests per minute

A request refused with 429 does not count as a call. A create refused during
its penalty starts the penalty again (our reading of "penalty": a client must
back off longer than 12 s, or it stays locked out). Limits act on real time,
because the client's timers are real, whatever the simulator's clock speed.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LIMITS", "Limit", "RateLimiter"]


@dataclass(frozen=True, slots=True)
class Limit:
    """One endpoint's limit: a minimum interval, or `calls` per `period_s`."""

    interval_s: float = 0.0
    calls: int = 0
    period_s: float = 0.0
    penalty_s: float = 0.0
    #: The threshold the 429 message names, as the service words it.
    threshold: str = ""
    #: The 429 body is JSON ``{success, error, msg}`` (destroy) instead of plain text.
    json_body: bool = False


#: Limits by the API's route name and method (see `simulator.api`).
LIMITS: dict[tuple[str, str], Limit] = {
    ("GET", "instances_v1"): Limit(interval_s=1.0, threshold="1.0"),
    ("GET", "instance"): Limit(interval_s=2.0, threshold="2.0"),
    ("DELETE", "instance"): Limit(interval_s=3.0, threshold="3.0", json_body=True),
    ("PUT", "instance"): Limit(interval_s=1.0, threshold="1.0"),
    ("PUT", "reboot"): Limit(interval_s=1.0, threshold="1.0"),
    ("PUT", "asks"): Limit(interval_s=4.5, penalty_s=12.0, threshold="4.5"),
    ("POST", "bundles"): Limit(calls=10, period_s=60.0, threshold="10/minute"),
    ("GET", "bundles"): Limit(calls=10, period_s=60.0, threshold="10/minute"),
}


class RateLimiter:
    """Decides, per (method, route, identity), whether a request is admitted.

    Not thread-safe on its own: the market calls it under its lock.
    """

    def __init__(
        self,
        limits: dict[tuple[str, str], Limit] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = LIMITS if limits is None else limits
        self._clock = clock
        self._last: dict[tuple[str, str, str], float] = {}
        self._calls: dict[tuple[str, str, str], deque[float]] = {}
        self._blocked_until: dict[tuple[str, str, str], float] = {}

    def check(self, method: str, route: str, identity: str) -> Limit | None:
        """None if admitted (and counted), else the `Limit` that refused it."""
        limit = self.limits.get((method, route))
        if limit is None:
            return None
        key = (method, route, identity)
        now = self._clock()
        if now < self._blocked_until.get(key, 0.0):
            self._blocked_until[key] = now + limit.penalty_s
            return limit
        last = self._last.get(key)
        too_soon = limit.interval_s > 0 and last is not None and now - last < limit.interval_s
        window = self._calls.setdefault(key, deque()) if limit.calls > 0 else None
        if window is not None:
            while window and now - window[0] >= limit.period_s:
                window.popleft()
            too_soon = too_soon or len(window) >= limit.calls
        if too_soon:
            if limit.penalty_s > 0:
                self._blocked_until[key] = now + limit.penalty_s
            return limit
        self._last[key] = now
        if window is not None:
            window.append(now)
        return None
