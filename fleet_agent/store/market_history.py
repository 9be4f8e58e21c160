"""Market history (`fa_market_points`): the monitor's readings of the
operator's Curio node on the Snark Market, with the challenge ledger and the
hour's revenue, cost and profit (fleet_agent/market/point.py).

The `observe_market` activity (activities/market.py) reads the last point
(the ledger it continues) and the point about an hour before (the hour's
revenue; in the first hour the oldest), and adds one point per reading;
the levers add one when they withdraw asks (the ledger counts them); `status`, the console and the
model's context read the latest. Points older than `KEEP_DAYS` are deleted
as new ones come. A table that is only added needs no schema version
(schema.py).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, select

from fleet_agent.market.point import MarketPoint

from .base import Repository
from .tables import MarketPointRow, table_of
from .timestamps import require_aware

__all__ = ["KEEP_DAYS", "MarketHistory"]

#: A week of the business, and a day more for its first hour.
KEEP_DAYS = 8


class MarketHistory(Repository):
    """Reads and writes `fa_market_points` on a `Store`'s engine (synchronous)."""

    def record(self, agent_id: str, point: MarketPoint) -> bool:
        """Keep `point` (False: one at the same time is there already, as
        after a retried activity) and forget the agent's points older than
        `KEEP_DAYS` before it."""
        at = require_aware(point.at, "point.at")
        values = {"agent_id": agent_id, "at": at, "data": point.model_dump_json()}
        table = table_of(MarketPointRow)
        with self._engine.begin() as conn:
            added = conn.execute(
                self._insert_ignoring_conflict(MarketPointRow, ["agent_id", "at"], values)
            ).rowcount
            conn.execute(
                delete(table).where(
                    (table.c.agent_id == agent_id) & (table.c.at < at - timedelta(days=KEEP_DAYS))
                )
            )
        return bool(added)

    def latest(self, agent_id: str) -> MarketPoint | None:
        """The agent's last point, or None before its first reading."""
        table = table_of(MarketPointRow)
        stmt = (
            select(table.c.data)
            .where(table.c.agent_id == agent_id)
            .order_by(table.c.at.desc())
            .limit(1)
        )
        with self._engine.connect() as conn:
            data = conn.execute(stmt).scalar()
        return MarketPoint.model_validate_json(data) if data is not None else None

    def at_or_before(self, agent_id: str, at: datetime) -> MarketPoint | None:
        """The agent's last point at or before `at` (the hour's start), or None."""
        table = table_of(MarketPointRow)
        stmt = (
            select(table.c.data)
            .where((table.c.agent_id == agent_id) & (table.c.at <= require_aware(at, "at")))
            .order_by(table.c.at.desc())
            .limit(1)
        )
        with self._engine.connect() as conn:
            data = conn.execute(stmt).scalar()
        return MarketPoint.model_validate_json(data) if data is not None else None

    def oldest_since(self, agent_id: str, since: datetime) -> MarketPoint | None:
        """The agent's first point at or after `since` (the hour's base in
        its first hour, when no point is an hour old), or None."""
        table = table_of(MarketPointRow)
        stmt = (
            select(table.c.data)
            .where((table.c.agent_id == agent_id) & (table.c.at >= require_aware(since, "since")))
            .order_by(table.c.at.asc())
            .limit(1)
        )
        with self._engine.connect() as conn:
            data = conn.execute(stmt).scalar()
        return MarketPoint.model_validate_json(data) if data is not None else None

    def series(self, agent_id: str, since: datetime, limit: int = 5_000) -> list[MarketPoint]:
        """The agent's points from `since` on, oldest first; at most `limit`
        (the latest), so a plot of a day stays small."""
        table = table_of(MarketPointRow)
        stmt = (
            select(table.c.data)
            .where((table.c.agent_id == agent_id) & (table.c.at >= require_aware(since, "since")))
            .order_by(table.c.at.desc())
            .limit(limit)
        )
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).scalars().all()
        return [MarketPoint.model_validate_json(d) for d in reversed(rows)]
