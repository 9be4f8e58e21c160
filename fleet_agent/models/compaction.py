"""Payloads of the `compact_session` activity (fleet_agent/llm/compaction.py)."""

from __future__ import annotations

from fleet_agent.wire import Wire

__all__ = ["CompactRequest", "CompactResult"]


class CompactRequest(Wire):
    agent_id: str
    session: int
    # The run whose prompt is being prepared: runs before it may be folded.
    run: int
    history_token_budget: int


class CompactResult(Wire):
    """What was folded; IDs and figures only (the summary's text stays in the store)."""

    folded_runs: int = 0
    upto_run: int = 0
    source: str = ""  # 'llm' | 'digest' | '' (nothing to fold)
    fallback_reason: str = ""
    tokens: int = 0
