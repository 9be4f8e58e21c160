"""The rules the market's levers are held to, and what the fleet's size
means for the market. Each guard returns the refusal (one line naming the
rule and the setting) or None; the levers (activities/market.py) change
nothing when one refuses.

- **The price** (`price_refusal`): within the operator's range
  [`market_min_price_nfil`, `market_max_price_nfil`]; a maximum of 0 means
  the agent may not set the price at all. One change moves it by at most
  `MAX_STEP` (half) of the node's current price, up or down (to 1.5x or
  0.5x): the market clears at the cheapest asks, so a wild step either
  gives work away or prices the node out of it, and a model's unit slip
  (FIL for nFIL, 10^9) is caught here. A node at price 0 (a fresh one) has
  no step limit.
- **Withdrawals** (`withdraw_refusal`): re-pricing the open asks
  withdraws them (1 challenge proof each, the doc). Refused past
  `market_max_withdrawals_per_hour` in the last hour (the ledger's
  withdrawals now less those of the point about an hour before:
  `withdrawals_last_hour`), or when the balance left would not cover the
  slots in use (50 challenge proofs each: a shortfall frees no slot, but
  the next late proof would cost a slot in use).
- **Requests** (`requests_refusal`): on is refused while no machine of the
  fleet proves (work the market assigns then is late: 50 challenge proofs each),
  before any reading, without a wallet, or at price 0 (asks at 0 take any
  work). Off is always allowed; its withdrawals are held to the hourly limit
  (`withdraw_allowance`): the asks past it stay open.
- **The fleet**: the create and destroy guards are
  fleet_agent/market/fleet_bounds.py's.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math

from .point import CHALLENGES_PER_SLOT, MarketPoint, MarketPolicy, PriceChange

__all__ = [
    "MAX_STEP",
    "price_refusal",
    "requests_refusal",
    "withdraw_allowance",
    "withdraw_refusal",
    "withdrawals_last_hour",
]

#: The most one price change moves the node's price, as a share of it.
MAX_STEP = 0.5


def price_refusal(change: PriceChange, current_nfil: int) -> str | None:
    """Why the node's price may not go from `current_nfil` to the change's, or None."""
    policy, new = change.policy, change.price_nfil
    if policy.max_price_nfil == 0:
        return (
            "market_max_price_nfil is 0: the agent may not set the ask price "
            "(the operator sets market_min_price_nfil and market_max_price_nfil)"
        )
    if not policy.min_price_nfil <= new <= policy.max_price_nfil:
        return (
            f"{new} nFIL is outside the operator's range, market_min_price_nfil="
            f"{policy.min_price_nfil} to market_max_price_nfil={policy.max_price_nfil}"
        )
    if current_nfil > 0:
        low = math.ceil(current_nfil * (1 - MAX_STEP))
        high = math.floor(current_nfil * (1 + MAX_STEP))
        if not low <= new <= high:
            return (
                f"{new} nFIL is more than {MAX_STEP:.0%} from the node's price, {current_nfil} "
                f"nFIL: one change goes from {low} to {high} nFIL"
            )
    return None


def withdrawals_last_hour(latest: MarketPoint | None, hour_ago: MarketPoint | None) -> int:
    """Asks the agent withdrew in the last hour, by the ledger: the latest
    point's withdrawals less those of the last point at or before an hour
    ago (none before: every one counted is within the hour)."""
    if latest is None:
        return 0
    before = hour_ago.ledger.withdrawals_total if hour_ago is not None else 0
    return max(0, latest.ledger.withdrawals_total - before)


def withdraw_allowance(policy: MarketPolicy, withdrawn_last_hour: int) -> int:
    """Asks that may still be withdrawn this hour."""
    return max(0, policy.max_withdrawals_per_hour - withdrawn_last_hour)


def withdraw_refusal(
    n: int, point: MarketPoint | None, withdrawn_last_hour: int, policy: MarketPolicy
) -> str | None:
    """Why `n` open asks may not be withdrawn to re-price them, or None."""
    if n <= 0:
        return None
    if point is None:
        return "no market reading yet, so the challenge balance is unknown"
    allowed = withdraw_allowance(policy, withdrawn_last_hour)
    if n > allowed:
        return (
            f"withdrawing {n} ask(s) with {withdrawn_last_hour} withdrawn in the last hour passes "
            f"market_max_withdrawals_per_hour={policy.max_withdrawals_per_hour}"
        )
    left = point.ledger.challenges - n
    covers = CHALLENGES_PER_SLOT * point.slots_used
    if left < covers:
        return (
            f"withdrawing {n} ask(s) costs {n} challenge proof(s) and leaves about {left}, "
            f"under the {covers} the {point.slots_used} slot(s) in use need "
            f"({CHALLENGES_PER_SLOT} each)"
        )
    return None


def requests_refusal(enabled: bool, point: MarketPoint | None, wallet: str) -> str | None:
    """Why the node may not start asking for work (`enabled`), or None; off always may."""
    if not enabled:
        return None
    if point is None:
        return "no market reading yet, so the fleet's GPUs are unknown"
    if point.gpus_proving <= 0:
        # Loading machines do not count: a first boot with its parameters
        # takes longer than the 45 minutes assigned work has.
        return (
            "no machine of the fleet proves yet: work the market assigns would be late "
            f"({CHALLENGES_PER_SLOT} challenge proofs each); ask once one proves"
        )
    if not wallet:
        return "the node has no wallet (the operator sets it in Curio's Snark Market page)"
    if point.price_nfil <= 0:
        return "the node's ask price is 0, which takes any work: set_ask_price first"
    return None
