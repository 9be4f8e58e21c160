"""The autopilot's rules for the Snark Market (AgentConfig.market_mode
"snark"): the ask price, requests on or off, and the slots' bound on the
fleet, decided on the market line of the run's context (the `## Market`
section's data line: fleet_agent/llm/prompt_market.py), as the model would
read it. The tools' guards (activities/market.py) hold whatever is decided.

- **Price** (only when the operator gave a range: market_max_price_nfil > 0).
  A request takes an ask at or under its own price, which is the market's
  price when it arrived, and pays that price whatever the ask
  (simulator/snark_market/service.py, after the ToS's "matched
  automatically to the lowest-price eligible Provider"). So the ask sets
  our place in the line, not our pay, and the rule steers it by what our
  GPUs do, not by chasing the market:
  - Over the market's price: down to `PRICE_UNDER` under it (an ask over
    the market takes nothing).
  - GPUs idle while our asks wait: down one `PRICE_STEP` (within the
    range), the open asks withdrawn to take it (1 challenge proof each)
    while the hour's withdrawals allow.
  - Every GPU busy and work waiting: up one `PRICE_STEP`, never past
    `PRICE_UNDER` under the market's price, for new asks only. Higher
    costs nothing in work we could not prove, and our cheap asks may be
    what sets the market's price (simulator/snark_market/price.py), which
    every request pays.
  Following the market's price from under it instead spirals: our asks
  become the clearing ask, the market's price comes down to ours, ours
  follows, and the asks wait (measured: bench/results/
  2026-12-07-market-week-agent.md).
- **Requests.** Off while a machine of the fleet proves, no loss stands and
  the target is above 0: on (not before one proves: work taken while the
  first machines load would wait past its deadline, at 50 challenge proofs
  each). On while the target is 0 (the fleet is to go):
  off, so the queue drains before the fleet does.
- **Slots.** GPUs at or above the slots: no rental covers a gap (the
  create's guard would refuse it); the final text says what more slots
  cost in challenge proofs.

Pure: reads text, returns tool calls.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from fleet_agent.autopilot.run_view import Run, tool_use

__all__ = ["PRICE_SLACK", "PRICE_STEP", "PRICE_UNDER", "MarketView", "market_calls", "market_view"]

#: How far the market's price must be from ours before the autopilot moves:
#: a withdrawal costs a challenge proof, so small moves are not chased.
PRICE_SLACK = 0.10
#: How far under the market's price the ask sits (module doc).
PRICE_UNDER = 0.02
#: One step up, as a share of our price, while every GPU is busy.
PRICE_STEP = 0.10
_DATA = re.compile(r"^Market data: (?P<json>\{.*\})$", re.M)


@dataclass(frozen=True)
class MarketView:
    """The market line's fields the rules read."""

    enabled: bool
    price_nfil: int
    market_price_nfil: int | None
    asks_open: int
    rows_open: int
    queued: int
    gpus: int
    gpus_proving: int
    slots_total: int
    loss: bool
    min_price_nfil: int
    max_price_nfil: int
    withdrawals_left: int

    @property
    def slots_full(self) -> bool:
        return self.gpus >= max(1, self.slots_total)


def market_view(run: Run) -> MarketView | None:
    """The run's market line, or None (the market is off, or the line unreadable)."""
    found = _DATA.search(run.context)
    if found is None:
        return None
    try:
        data: dict[str, Any] = json.loads(found.group("json"))
        market = data.get("market_price_nfil")
        return MarketView(
            enabled=bool(data["enabled"]),
            price_nfil=int(data["price_nfil"]),
            market_price_nfil=int(market) if market is not None else None,
            asks_open=int(data["asks_open"]),
            rows_open=int(data["rows_open"]),
            queued=int(data["queued"]),
            gpus=int(data["gpus"]),
            gpus_proving=int(data["gpus_proving"]),
            slots_total=int(data["slots_total"]),
            loss=bool(data["loss"]),
            min_price_nfil=int(data["min_price_nfil"]),
            max_price_nfil=int(data["max_price_nfil"]),
            withdrawals_left=int(data["withdrawals_left"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _priced(view: MarketView, *, turning_on: bool = False) -> dict[str, Any] | None:
    market, ours = view.market_price_nfil, view.price_nfil
    if view.max_price_nfil <= 0 or market is None or not (view.enabled or turning_on):
        return None
    low, high = max(view.min_price_nfil, 1), view.max_price_nfil
    ceiling = min(max(round(market * (1 - PRICE_UNDER)), low), high)
    idle = view.gpus_proving > view.rows_open and view.asks_open > 0
    reprice = idle and 0 < view.asks_open <= view.withdrawals_left
    if ours > market or ours > high:
        why = (
            f"our ask of {ours} nFIL is over the market's {market} nFIL, where no request "
            f"takes it: ask {ceiling} nFIL, just under"
        )
        return _set(ceiling, reprice, why, view)
    if turning_on:
        return None  # the node has no ask of ours yet to judge by
    if idle and ours > low:
        price = max(low, min(ours - 1, round(ours * (1 - PRICE_STEP))))
        idle_gpus = view.gpus_proving - view.rows_open
        why = (
            f"{idle_gpus} GPU(s) idle while {view.asks_open} ask(s) wait at {ours} nFIL: "
            f"ask {price} nFIL, a step down"
        )
        return _set(price, reprice, why, view)
    busy = view.rows_open >= view.gpus_proving > 0 and view.queued > 0
    if busy and ours < ceiling:
        price = min(ceiling, max(ours + 1, round(ours * (1 + PRICE_STEP))))
        why = (
            f"every GPU busy and {view.queued} row(s) waiting at {ours} nFIL: ask {price} nFIL "
            f"for new asks, a step up (the market pays {market} nFIL)"
        )
        return _set(price, False, why, view)
    return None


def _set(price: int, reprice: bool, why: str, view: MarketView) -> dict[str, Any]:
    if reprice:
        why += f"; {view.asks_open} open ask(s) withdrawn to take it while GPUs idle"
    return tool_use("set_ask_price", {"price_nfil": price, "reprice_open": reprice, "reason": why})


def market_calls(view: MarketView, target: float) -> list[dict[str, Any]]:
    """The levers this run pulls, before any fleet change."""
    calls: list[dict[str, Any]] = []
    if view.enabled and target <= 0:
        calls.append(
            tool_use(
                "set_requests",
                {"enabled": False, "reason": "the target is 0: no new work, the queue drains"},
            )
        )
        return calls
    turning_on = not view.enabled and target > 0 and view.gpus_proving > 0 and not view.loss
    # Requests going on at an ask over the market's price would take no work
    # until the next run: the price comes under it first, so the node's
    # first asks are opened at it.
    priced = _priced(view, turning_on=turning_on)
    if priced is not None:
        calls.append(priced)
    if turning_on:
        why = f"{view.gpus_proving} GPU(s) proving for a target of {target:g}: ask for work"
        calls.append(tool_use("set_requests", {"enabled": True, "reason": why}))
    return calls
