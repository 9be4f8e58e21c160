"""Which API requests get through: injected faults and vast.ai's rate limits.

A mixin of `simulator.market.Market`. ``*_next``/``*_rate`` fault rolls
(`_fault`) live here too, since rents and lists spend them as well.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from .base import MarketState
from .ratelimit import Limit, RateLimiter

__all__ = ["MarketAdmission", "Refusal"]

#: The 429 text of the `rate_limit` fault (a generic burst, as the docs word it).
_BURST_429_TEXT = "API requests too frequent"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A 429: the message, and whether the endpoint answers it as JSON."""

    msg: str
    json_body: bool = False


class MarketAdmission(MarketState):
    """Fault rolls and the rate limiter."""

    _limiter: RateLimiter
    _last_call: dict[tuple[str, str], float]

    def _fault(self, name: str, rolls: random.Random | None = None) -> bool:
        """Spend one ``<name>_next`` or roll ``<name>_rate``, on `rolls` when
        given (a rental's own stream) or the market's. Caller holds the lock."""
        counter = f"{name}_next"
        left = getattr(self.faults, counter, 0)
        if left > 0:
            setattr(self.faults, counter, left - 1)
            return True
        rate = float(getattr(self.faults, f"{name}_rate", 0.0))
        return rate > 0 and (rolls or self._fault_rng).random() < rate

    def admit(self, route: str, identity: str) -> bool:
        """Whether an API request gets through the fault limiter (False = 429).

        `route` is ``"<METHOD> <name>"``; see `admit_request` for the real limits."""
        method, _, name = route.partition(" ")
        return self.admit_request(method, name, identity) is None

    def admit_request(self, method: str, route: str, identity: str) -> Refusal | None:
        """None if an API request gets through, else why it is refused (429).

        Faults first (a `rate_limit` burst, `min_interval_s`), then vast.ai's
        documented per-endpoint limits (`simulator.ratelimit`) when on.
        Identity is whatever the client presented (its key, or its address)."""
        with self.lock:
            self.counters["requests"] += 1
            refusal: Refusal | None = None
            if self._fault("rate_limit"):
                refusal = Refusal(_BURST_429_TEXT)
            interval = self.faults.min_interval_s
            if refusal is None and interval > 0:
                key = (f"{method} {route}", identity)
                real_now = time.monotonic()
                last = self._last_call.get(key)
                if last is not None and real_now - last < interval:
                    refusal = Refusal(_BURST_429_TEXT)
                else:
                    self._last_call[key] = real_now
            if refusal is None and self.rate_limits:
                limit = self._limiter.check(method, route, identity)
                if limit is not None:
                    refusal = _refusal(limit)
            if refusal is not None:
                self.counters["rate_limited"] += 1
            return refusal

    def create_delay(self) -> float:
        """Real seconds a rent request waits before it is processed (0: none)."""
        with self.lock:
            if not self._fault("create_delay"):
                return 0.0
            self.counters["create_delays"] += 1
            return self.faults.create_delay_seconds

    def list_error(self) -> bool:
        """Whether this v1 list answers ``success: false``."""
        with self.lock:
            return self._fault("list_error")


def _refusal(limit: Limit) -> Refusal:
    msg = f"API requests too frequent endpoint threshold={limit.threshold}"
    return Refusal(msg, limit.json_body)
