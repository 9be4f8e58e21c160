"""The provider's business on the Snark Market: readings of the operator's
Curio node, the challenge ledger, revenue, cost and profit, and the guards
of the business's levers. Pure: no temporalio, no HTTP (activities/market.py
reads the node and pulls the levers).

- `point`: the models (`MarketReading`, `ChallengeLedger`, `MarketPoint`,
  the levers' requests and results);
- `parse`: the node's and the market's answers, read as hostile input;
- `ledger`: the challenge balance counted from the node's queue;
- `economics`: slots, revenue, cost, profit and loss per hour (the point);
- `guards`: the levers' rules, and `drain_needed` / `slots_cap` for the fleet's;
- `levers`: the tools' inputs (`set_ask_price`, `set_requests`);
- `settings`: `MarketEnv`, the worker's FLEET_MARKET_* variables.
"""

from .point import (
    CHALLENGES_PER_SLOT,
    ChallengeLedger,
    MarketLeverResult,
    MarketPoint,
    MarketPolicy,
    MarketReading,
    MarketStepRequest,
    MarketStepResult,
    PriceChange,
    QueueRow,
    RequestsChange,
)

__all__ = [
    "CHALLENGES_PER_SLOT",
    "ChallengeLedger",
    "MarketLeverResult",
    "MarketPoint",
    "MarketPolicy",
    "MarketReading",
    "MarketStepRequest",
    "MarketStepResult",
    "PriceChange",
    "QueueRow",
    "RequestsChange",
]
