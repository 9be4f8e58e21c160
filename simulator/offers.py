"""The market's order book: offers listed now, arriving and rented away over time.

Offers arrive as a Poisson process and each lives an exponential time (mean
`MEAN_OFFER_LIFETIME_S`) before someone else rents it, so the book holds about
`size` offers and keeps changing. Expiry is a heap, so bringing the book up to
the clock costs the offers that change, not the whole book. An offer is stored
as the four numbers `make_offer` rebuilds it from.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from typing import Any

from .catalogue import make_offer

__all__ = ["MEAN_OFFER_LIFETIME_S", "OfferBook", "SimOffer"]

MEAN_OFFER_LIFETIME_S = 2 * 3600.0
# After a gap this long (a simulator down for a day) the book is listed afresh
# instead of replaying every arrival.
_REFILL_AFTER_S = 6 * MEAN_OFFER_LIFETIME_S


@dataclass(slots=True)
class SimOffer:
    """One listed offer: its fields (as search returns them, before pricing)."""

    fields: dict[str, Any]
    listed_at: float
    expires_at: float


class OfferBook:
    """Offers by id; not thread-safe (the market's lock guards it)."""

    def __init__(self, seed: int, size: int, rng: random.Random, ids: random.Random) -> None:
        if size < 0:
            raise ValueError("the market size must be >= 0")
        self.seed = seed
        self.size = size
        self.offers: dict[int, SimOffer] = {}
        self._rng = rng
        self._ids = ids
        self._heap: list[tuple[float, int]] = []
        self.next_offer_id = 8_000_000 + ids.randrange(1_000_000)
        self.next_machine_id = 10_000 + ids.randrange(20_000)
        self.next_arrival_at = 0.0
        self.synced_to = 0.0

    @property
    def _mean_arrival_s(self) -> float:
        return MEAN_OFFER_LIFETIME_S / max(1, self.size)

    def fill(self, now: float) -> None:
        """List `size` fresh offers at `now` (the start of a market)."""
        for _ in range(self.size):
            self._list(now)
        self.next_arrival_at = now + self._rng.expovariate(1.0 / self._mean_arrival_s)
        self.synced_to = now

    def _list(self, now: float) -> None:
        offer_id = self.next_offer_id
        self.next_offer_id += self._ids.randint(1, 40)
        machine_id = self.next_machine_id
        self.next_machine_id += self._ids.randint(1, 9)
        lifetime = self._rng.expovariate(1.0 / MEAN_OFFER_LIFETIME_S)
        self._add(offer_id, machine_id, now, now + lifetime)

    def _add(self, offer_id: int, machine_id: int, listed_at: float, expires_at: float) -> None:
        fields = make_offer(self.seed, offer_id, machine_id, listed_at)
        self.offers[offer_id] = SimOffer(fields, listed_at, expires_at)
        heapq.heappush(self._heap, (expires_at, offer_id))

    def sync(self, now: float, *, churn: bool) -> None:
        """Bring the book up to `now`: new offers in, rented-away offers out."""
        if not churn or self.size == 0:
            self.synced_to = max(self.synced_to, now)
            return
        if now - self.synced_to > _REFILL_AFTER_S:
            self.offers.clear()
            self._heap.clear()
            self.fill(now)
            return
        while self.next_arrival_at <= now:
            at = self.next_arrival_at
            self._list(at)
            self.next_arrival_at = at + self._rng.expovariate(1.0 / self._mean_arrival_s)
        while self._heap and self._heap[0][0] <= now:
            _, offer_id = heapq.heappop(self._heap)
            offer = self.offers.get(offer_id)
            if offer is not None and offer.expires_at <= now:
                del self.offers[offer_id]
        self.synced_to = max(self.synced_to, now)

    def restart_arrivals(self, now: float) -> None:
        """Arrivals resume from `now` (after churn was off), not from the past."""
        self.next_arrival_at = now + self._rng.expovariate(1.0 / self._mean_arrival_s)
        self.synced_to = now

    def take(self, offer_id: int) -> SimOffer | None:
        """Remove and return the offer (rented, by us or by someone else)."""
        return self.offers.pop(offer_id, None)

    # ---------------------------------------------------------------- state

    def to_json(self) -> dict[str, Any]:
        """The book as JSON-ready data: four numbers per offer."""
        return {
            "size": self.size,
            "next_offer_id": self.next_offer_id,
            "next_machine_id": self.next_machine_id,
            "next_arrival_at": self.next_arrival_at,
            "synced_to": self.synced_to,
            "offers": [
                [offer_id, o.fields["machine_id"], o.listed_at, o.expires_at]
                for offer_id, o in self.offers.items()
            ],
        }

    def load(self, data: dict[str, Any]) -> None:
        """Replace the book with what `to_json` saved (offers rebuilt from the seed)."""
        self.size = int(data["size"])
        self.next_offer_id = int(data["next_offer_id"])
        self.next_machine_id = int(data["next_machine_id"])
        self.next_arrival_at = float(data["next_arrival_at"])
        self.synced_to = float(data["synced_to"])
        self.offers.clear()
        self._heap.clear()
        for offer_id, machine_id, listed_at, expires_at in data["offers"]:
            self._add(int(offer_id), int(machine_id), float(listed_at), float(expires_at))
