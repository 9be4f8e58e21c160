"""Reads of what the LLM cost: totals over runs by window or session.

Each run counts once, by its latest finished attempt: the attempt after a
reset reuses the replies the earlier one stored (messages are keyed by run),
so summing every attempt would count paid rounds twice. Tokens and LLM
seconds come from `fa_runs`, the cost and the tools' seconds from
`fa_run_costs` (a run recorded before that table existed counts $0 there).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, Select, bindparam, case
from sqlmodel import col, func, select

from fleet_agent.models import LlmCostSummary, LlmTotals, RunStatus, TokenUsage

from .base import Repository
from .run_reads import latest_finished_attempt
from .tables import RunCostRow, RunRow
from .timestamps import require_aware

__all__ = ["RunCosts"]

_USAGE = tuple(TokenUsage.model_fields)
"""The token counters, each a column of `fa_runs` of the same name."""


class RunCosts(Repository):
    """LLM tokens, cost and seconds summed over an agent's runs."""

    def llm_totals(
        self, agent_id: str, *, since: datetime | None = None, session: int | None = None
    ) -> LlmTotals:
        """The runs that started at or after `since` and/or belong to `session`."""
        stmt = _latest_attempts(select(*_sums()), agent_id)
        if since is not None:
            stmt = stmt.where(col(RunRow.started_at) >= require_aware(since, "since"))
        if session is not None:
            stmt = stmt.where(col(RunRow.session) == session)
        with self._engine.connect() as conn:
            return _totals(conn.execute(stmt).one())

    def llm_cost_summary(self, agent_id: str, now: datetime) -> LlmCostSummary:
        """Today (since midnight UTC) and the last 24 h, as of `now`: one query
        over the last 24 h, which always holds today."""
        now = require_aware(now, "now").astimezone(UTC)
        midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
        params = {"agent_id": agent_id, "midnight": midnight, "since": now - timedelta(hours=24)}
        with self._engine.connect() as conn:
            row = tuple(conn.execute(_summary_statement(), params).one())
        half = len(row) // 2
        return LlmCostSummary(as_of=now, today=_totals(row[half:]), last_24h=_totals(row[:half]))


@cache
def _summary_statement() -> Select[Any]:
    """`llm_cost_summary`'s query, built once (every run's context asks for it,
    and building its twenty aggregates took longer than running them)."""
    today = col(RunRow.started_at) >= bindparam("midnight")
    return _latest_attempts(select(*_sums(), *_sums(today)), bindparam("agent_id")).where(
        col(RunRow.started_at) >= bindparam("since")
    )


def _sums(where: ColumnElement[bool] | None = None) -> list[Any]:
    """The aggregates `_totals` reads, over the rows where `where` holds (all
    rows when None): runs, the token counters, LLM seconds, cost, tool seconds."""

    def only(value: Any) -> Any:
        return value if where is None else case((where, value), else_=None)

    return [
        func.count(only(col(RunRow.run))),
        *(func.coalesce(func.sum(only(getattr(RunRow, name))), 0) for name in _USAGE),
        func.coalesce(func.sum(only(col(RunRow.llm_seconds))), 0.0),
        func.coalesce(func.sum(only(col(RunCostRow.cost_usd))), 0.0),
        func.coalesce(func.sum(only(col(RunCostRow.tool_seconds))), 0.0),
    ]


def _latest_attempts(stmt: Select[Any], agent_id: str | BindParameter[str]) -> Select[Any]:
    """`stmt` over the agent's runs, each by its latest finished attempt, with
    that attempt's `fa_run_costs` row (if any). The database does the sums, so
    the time does not grow with the runs summed (a day holds ~300 at the
    default heartbeat; index `ix_fa_runs_agent_started` finds them)."""
    return (
        stmt.select_from(RunRow)
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
            col(RunRow.attempt) == latest_finished_attempt(),
        )
    )


def _totals(row: Sequence[Any]) -> LlmTotals:
    runs, *usage, llm_seconds, cost_usd, tool_seconds = row
    return LlmTotals(
        runs=runs,
        usage=TokenUsage(**dict(zip(_USAGE, map(int, usage), strict=True))),
        cost_usd=float(cost_usd),
        llm_seconds=float(llm_seconds),
        tool_seconds=float(tool_seconds),
    )
