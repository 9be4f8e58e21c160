"""Clients' demand: each simulated minute's requests, their kinds and their price limits.

Touches nothing: a pure function of the settings, the seed and the minute.
The arrival times are the demand curve's (simulator/demand.py: Poisson per
minute, from a stream seeded by (seed, minute)); each request's kind (Snap
with probability `snap_share`) and its client's most per P (log-normal
around `client_max_price_nfil`) come from a second stream seeded by (seed,
minute), so the same seed gives the same clients however the clock is stepped.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from .config import MarketConfig, ProofKind

__all__ = ["Arrival", "minute_arrivals"]


@dataclass(frozen=True, slots=True)
class Arrival:
    """A client about to buy a proof."""

    at: float
    kind: ProofKind
    #: The most this client pays, nFIL per P (tasks/proofshare/task_client_send.go
    #: refuses to buy above the client's max per-proof price).
    max_price_nfil: int


def minute_arrivals(config: MarketConfig, seed: int, minute: int) -> list[Arrival]:
    """The requests of sim minute [60 x `minute`, + 60), in time order."""
    times = config.demand.arrivals(minute, seed)
    rng = random.Random(f"{seed}:snark-clients:{minute}")
    out = []
    for t in times:
        kind: ProofKind = "snap" if rng.random() < config.snap_share else "porep"
        spread = math.exp(rng.gauss(0.0, config.client_price_sigma))
        out.append(Arrival(t, kind, max(1, round(config.client_max_price_nfil * spread))))
    return out
