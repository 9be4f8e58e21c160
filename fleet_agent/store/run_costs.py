"""Reads of what the LLM cost: totals over runs by window or session.

Each run counts once, by its latest finished attempt: the attempt after a
reset reuses the replies the earlier one stored (messages are keyed by run),
so summing every attempt would count paid rounds twice. Tokens and LLM
seconds come from `fa_runs`, the cost and the tools' seconds from
`fa_run_costs` (a run recorded before that table existed counts $0 there).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlmodel import Session, col, select

from fleet_agent.models import LlmCostSummary, LlmTotals, RunStatus, TokenUsage

from .base import StoreBase
from .tables import RunCostRow, RunRow
from .timestamps import require_aware

__all__ = ["RunCosts"]


class RunCosts(StoreBase):
    """LLM tokens, cost and seconds summed over an agent's runs."""

    def llm_totals(
        self, agent_id: str, *, since: datetime | None = None, session: int | None = None
    ) -> LlmTotals:
        """The runs that started at or after `since` and/or belong to `session`."""
        stmt = (
            select(RunRow, RunCostRow)
            .join(
                RunCostRow,
                (col(RunCostRow.agent_id) == col(RunRow.agent_id))
                & (col(RunCostRow.run) == col(RunRow.run))
                & (col(RunCostRow.attempt) == col(RunRow.attempt)),
                isouter=True,
            )
            .where(
                col(RunRow.agent_id) == agent_id,
                col(RunRow.status) != RunStatus.RUNNING.value,
            )
        )
        if since is not None:
            stmt = stmt.where(col(RunRow.started_at) >= require_aware(since, "since"))
        if session is not None:
            stmt = stmt.where(col(RunRow.session) == session)
        latest: dict[int, tuple[RunRow, RunCostRow | None]] = {}
        with Session(self._engine) as db:
            for row, found in db.exec(stmt).all():
                kept = latest.get(row.run)
                if kept is None or kept[0].attempt < row.attempt:
                    latest[row.run] = (row, found)
        totals = LlmTotals()
        for row, cost in latest.values():
            totals.runs += 1
            totals.usage = totals.usage + TokenUsage(
                input_tokens=row.input_tokens,
                output_tokens=row.output_tokens,
                cache_read_input_tokens=row.cache_read_input_tokens,
                cache_creation_input_tokens=row.cache_creation_input_tokens,
                cache_creation_1h_input_tokens=row.cache_creation_1h_input_tokens,
            )
            totals.llm_seconds += row.llm_seconds
            if cost is not None:
                totals.cost_usd += cost.cost_usd
                totals.tool_seconds += cost.tool_seconds
        return totals

    def llm_cost_summary(self, agent_id: str, now: datetime) -> LlmCostSummary:
        """Today (since midnight UTC) and the last 24 h, as of `now`."""
        now = require_aware(now, "now").astimezone(UTC)
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return LlmCostSummary(
            as_of=now,
            today=self.llm_totals(agent_id, since=midnight),
            last_24h=self.llm_totals(agent_id, since=now - timedelta(hours=24)),
        )
