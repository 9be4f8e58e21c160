"""What a run's LLM rounds cost, priced from the stored replies.

Each stored reply (`fa_messages`, kind 'assistant') keeps the usage the API
reported and the model that answered; the price table is
fleet_agent/llm/model_table.py with FLEET_LLM_PRICES applied. The run's cost is
written beside its record (`fa_run_costs`) when the run is recorded; the
store sums it per session, per day and over 24 h (fleet_agent/store/run_costs.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fleet_agent.llm.model_table import ModelInfo, cost_usd
from fleet_agent.llm.transcript import StoredReply

__all__ = ["price_of", "replies_cost"]


def price_of(model: str, table: Mapping[str, ModelInfo]) -> ModelInfo | None:
    """`model`'s entry; else the longest entry its name starts with (the API may
    answer with a dated ID such as `claude-haiku-4-5-20251001`); else None
    (the autopilot, or a model nobody priced: counted at $0)."""
    if model in table:
        return table[model]
    prefixes = [name for name in table if model.startswith(name)]
    return table[max(prefixes, key=len)] if prefixes else None


def replies_cost(replies: Iterable[StoredReply], table: Mapping[str, ModelInfo]) -> float:
    """The sum of each reply's usage at its own model's prices."""
    total = 0.0
    for reply in replies:
        info = price_of(reply.model, table)
        if info is not None:
            total += cost_usd(reply.usage, info)
    return total
