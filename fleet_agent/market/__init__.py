"""The provider's business on the Snark Market: readings of the operator's
Curio node, the challenge ledger, revenue, cost and profit, and the guards
of the business's levers. Pure: no temporalio, no HTTP (activities/market.py
reads the node and pulls the levers).

- `point`: the models (`MarketReading`, `ChallengeLedger`, `MarketPoint`,
  the levers' requests and results).
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
