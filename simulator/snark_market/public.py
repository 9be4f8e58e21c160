"""What the market shows everyone: its current price, and a FIL's worth in dollars.

Touches nothing: pure functions of the market's figures and the sim time,
and a seeded walk. simulator/curio/web.py serves them on the Curio
stand-in's origin (docs/SIMULATOR.md, "The Snark Market"):

- ``GET /v0/proofs/client/current-price``: the market service's public
  price, in the shape of curio lib/proofsvc/clientctl.go ``PriceResponse``
  (the real service is ``https://mainnet.snass.fsp.sh/v0/proofs``; its code
  is not public). ``price_nfil`` is what a client pays per P, base plus
  service fee (task_client_send.go checks ``base + fee`` against the
  client's most and pays both); this market charges no fee, so the base is
  the price, the fee 0, and the fee's fraction 0/1 (a denominator of 1, so
  a reader that divides does not divide by 0: ours). ``epoch`` is the
  Filecoin mainnet epoch of the sim time. Keys in the struct's order,
  compact, one newline: what Go's ``json.NewEncoder(w).Encode`` writes.
- ``GET /api/v3/simple/price?ids=filecoin&vs_currencies=usd``: CoinGecko's
  "Coin Price by IDs" (docs.coingecko.com/reference/simple-price:
  ``{"bitcoin":{"usd":67187.3358936566}}``): each known id with each known
  currency; an unknown id is left out (``{}`` when none is known), a known
  id with no known currency is ``{}`` under it, and without
  ``vs_currencies`` the answer is 422 ``{"error":"Missing parameter
  vs_currencies"}``. Only ``filecoin`` in ``usd`` is known here.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping

from .config import FIL_USD_MAX

__all__ = [
    "FILECOIN_GENESIS",
    "FIL_USD_CONTENT_TYPE",
    "PRICE_CONTENT_TYPE",
    "FilUsdWalk",
    "current_price_body",
    "mainnet_epoch",
    "simple_price_body",
]

#: Filecoin mainnet's genesis block time, 2020-08-24T22:00:00Z, and its
#: 30-second epochs (lotus build/buildconstants/params_mainnet.go
#: ``BlockDelaySecs = builtin2.EpochDurationSeconds``).
FILECOIN_GENESIS = 1_598_306_400
EPOCH_S = 30
PRICE_CONTENT_TYPE = "application/json"
FIL_USD_CONTENT_TYPE = "application/json; charset=utf-8"
#: The rate's resolution, dollars (ours).
_USD_DIGITS = 4


def mainnet_epoch(t: float) -> int:
    """The Filecoin mainnet epoch at Unix time `t`."""
    return math.floor((t - FILECOIN_GENESIS) / EPOCH_S)


def current_price_body(price_nfil: int, t: float) -> bytes:
    """``PriceResponse`` at market price `price_nfil` (module doc)."""
    body = {
        "price_nfil": price_nfil,
        "price_nfil_base": price_nfil,
        "price_nfil_service_fee": 0,
        "fee_num": 0,
        "fee_denom": 1,
        "epoch": mainnet_epoch(t),
    }
    return (json.dumps(body, separators=(",", ":")) + "\n").encode()


def simple_price_body(query: Mapping[str, str], fil_usd: float) -> tuple[int, bytes]:
    """CoinGecko's answer to `query` (module doc): the HTTP status and body."""
    currencies = query.get("vs_currencies")
    if not currencies:
        return 422, b'{"error":"Missing parameter vs_currencies"}'
    ids = _listed(query.get("ids", ""))
    out: dict[str, dict[str, float]] = {}
    if "filecoin" in ids:
        out["filecoin"] = {"usd": fil_usd} if "usd" in _listed(currencies) else {}
    return 200, json.dumps(out, separators=(",", ":")).encode()


def _listed(text: str) -> list[str]:
    return [part.strip().lower() for part in text.split(",") if part.strip()]


class FilUsdWalk:
    """Dollars per FIL: `start_usd` until the first whole sim hour after
    `start_t`; then each hour ``h`` the log of the rate moves by ``sigma x z``,
    ``z`` a normal draw from a stream seeded by (seed, h). A function of the
    sim time alone: however often it is read, a seed gives one path."""

    def __init__(self, start_usd: float, sigma: float, seed: int, start_t: float) -> None:
        self.start_usd = start_usd
        self.sigma = sigma
        self.seed = seed
        self._hour0 = math.floor(start_t / 3600.0)
        self._hour, self._log = self._hour0, 0.0

    def at(self, t: float) -> float:
        """The rate at sim time `t`, rounded to 1/10,000 of a dollar."""
        hour = math.floor(t / 3600.0)
        if self.sigma > 0:
            if hour < self._hour:  # an earlier time: walk again from the start
                self._hour, self._log = self._hour0, 0.0
            while self._hour < hour:
                self._hour += 1
                z = random.Random(f"{self.seed}:fil-usd:{self._hour}").gauss(0.0, 1.0)
                self._log += self.sigma * z
        rate = self.start_usd * math.exp(self._log)
        return round(min(FIL_USD_MAX, max(10.0**-_USD_DIGITS, rate)), _USD_DIGITS)
