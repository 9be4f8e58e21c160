"""Reads over time for the console's plot: the runs' context messages and the
spend ledger's hours since a moment. Reads only; one query each.

The context message of each run (kind `context`, written by `load_context`)
holds the fleet's summary line at the run's start: the only record of
capacity over time the store keeps. The spend hours hold what the fleet cost
in each UTC hour.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, select

from .base import Repository
from .records import MessageRecord
from .tables import MessageRow, SpendHourRow, table_of
from .timestamps import require_aware

__all__ = ["SpendHour", "TrendReads"]

CONTEXT_KIND = "context"


class SpendHour(BaseModel):
    """What the agent's machines cost in one UTC hour, and the seconds billed."""

    model_config = ConfigDict(frozen=True)

    hour: datetime
    usd: float
    seconds: float


class TrendReads(Repository):
    """Reads of `fa_messages` and `fa_spend_hours` over a time window (synchronous)."""

    def context_messages_since(self, agent_id: str, since: datetime) -> list[MessageRecord]:
        """Each run's context message written at or after `since`, oldest first."""
        require_aware(since, "since")
        m = table_of(MessageRow)
        stmt = (
            select(m)
            .where(m.c.agent_id == agent_id, m.c.kind == CONTEXT_KIND, m.c.created_at >= since)
            .order_by(m.c.created_at, m.c.run)
        )
        with self._engine.connect() as conn:
            return [
                MessageRecord.model_validate(row, from_attributes=True)
                for row in conn.execute(stmt)
            ]

    def spend_hours_since(self, agent_id: str, since: datetime) -> list[SpendHour]:
        """The agent's spend per UTC hour from the hour holding `since` on, oldest first."""
        require_aware(since, "since")
        h = table_of(SpendHourRow)
        first = since.replace(minute=0, second=0, microsecond=0)
        stmt = (
            select(h.c.hour, func.sum(h.c.usd), func.sum(h.c.seconds))
            .where(h.c.agent_id == agent_id, h.c.hour >= first)
            .group_by(h.c.hour)
            .order_by(h.c.hour)
        )
        with self._engine.connect() as conn:
            return [
                SpendHour(hour=hour, usd=float(usd or 0.0), seconds=float(sec or 0.0))
                for hour, usd, sec in conn.execute(stmt)
            ]
