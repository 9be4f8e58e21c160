"""How the run log shows what the LLM cost: per round, per run, per session.

The price table is the worker's (fleet_agent/llm/model_table.py with
FLEET_LLM_PRICES applied), read from this process's environment.
"""

from __future__ import annotations

import os

from fleet_agent.llm.model_table import KNOWN_MODELS, PRICES_ENV, model_table
from fleet_agent.llm.transcript import StoredReply
from fleet_agent.models import LlmTotals, TokenUsage
from fleet_agent.store.accounting import price_of, replies_cost

__all__ = ["cached_share", "round_cost", "totals_line"]


def cached_share(usage: TokenUsage) -> str:
    """The part of the prompt read from the cache: `92%`, `—` with no prompt."""
    prompt = usage.prompt_tokens
    return f"{usage.cache_read_input_tokens / prompt:.0%}" if prompt else "—"


def round_cost(reply: StoredReply) -> str:
    """`; $0.0012` at the table's price of the reply's model; "" for an unpriced one."""
    try:
        prices = model_table(os.environ.get(PRICES_ENV))
    except ValueError:  # a bad FLEET_LLM_PRICES is the worker's error to report
        prices = dict(KNOWN_MODELS)
    if price_of(reply.model, prices) is None:
        return ""
    return f"; ${replies_cost([reply], prices):.4f}"


def totals_line(what: str, t: LlmTotals) -> str:
    """`session 2: 14 run(s) · cost $0.1200 · 91% of 120,000 prompt tokens cached · …`."""
    return (
        f"{what}: {t.runs} run(s) · cost ${t.cost_usd:.4f} · {t.cached_share:.0%} of "
        f"{t.usage.prompt_tokens:,} prompt tokens cached · {t.usage.output_tokens:,} out · "
        f"LLM {t.llm_seconds:.1f}s · tools {t.tool_seconds:.1f}s"
    )
