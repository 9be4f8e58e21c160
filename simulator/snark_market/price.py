"""The market price rule: a pure function of the price, the demand and the open asks.

Touches nothing. The doc says only that "the snark marketplace automatically
adjusts the market price to match supply to demand" (curio
documentation/en/experimental-features/Snark-Market.md); the service's rule
is not public, so this one is ours. Every interval (a minute by default):

- **need** = the requests that arrived in the interval (bought, not
  refused) + the requests still waiting for an ask;
- the **clearing price** is the price of the need-th cheapest open ask (the
  price at which the open asks would cover the need); with no need, the
  cheapest open ask's; with no open ask and no need, the price stays;
- with more need than open asks (a shortage) the target is the price
  raised by `shortage_step`;
- the price moves `smoothing` of the way to the target, in whole nFIL,
  within [1 nFIL, 1 FIL].

Demand pushes it up through the need (and clients refuse to buy above their
most, which pushes back); supply pulls it down through the open asks.
"""

from __future__ import annotations

from collections.abc import Iterable

from .config import MAX_PRICE_NFIL

__all__ = ["next_price"]


def next_price(
    price_nfil: int,
    need: int,
    ask_prices: Iterable[int],
    *,
    smoothing: float,
    shortage_step: float,
) -> int:
    """The price after one interval (module doc)."""
    asks = sorted(ask_prices)
    if need <= 0:
        target = float(asks[0]) if asks else float(price_nfil)
    elif len(asks) >= need:
        target = float(asks[need - 1])
    else:
        target = price_nfil * (1.0 + shortage_step)
    moved = round(price_nfil + (target - price_nfil) * smoothing)
    if moved == price_nfil and target > price_nfil:
        moved += 1  # rounding never holds a rising price still
    return min(MAX_PRICE_NFIL, max(1, moved))
