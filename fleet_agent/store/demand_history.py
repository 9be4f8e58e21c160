"""Demand history (`fa_demand_points`): the monitor's readings of demand and
the targets decided on them, for the forecast, the console, `status` and the
model's context.

The `observe_demand` activity (activities/demand.py) adds one point per
reading and reads back only the windows the forecast looks at (the last
hour, and the same time of each of the 7 days before), so a week of 30 s
polls (about 20,000 rows an agent) is never loaded whole. Points older than
`KEEP_DAYS` are deleted as new ones come. A table that is only added needs
no schema version (schema.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, or_, select

from fleet_agent.demand.point import DemandPoint
from fleet_agent.demand.reading import DemandSample

from .base import Repository
from .tables import DemandPointRow, table_of
from .timestamps import require_aware

__all__ = ["KEEP_DAYS", "DemandHistory"]

#: The forecast reads 7 earlier days; a day more covers its window's end.
KEEP_DAYS = 8
_SAMPLE_COLUMNS = (
    "at",
    "arrived_total",
    "done_total",
    "late_total",
    "queued",
    "in_flight",
    "saturated",
)


class DemandHistory(Repository):
    """Reads and writes `fa_demand_points` on a `Store`'s engine (synchronous)."""

    def record(self, agent_id: str, point: DemandPoint) -> bool:
        """Keep `point` (False: one at the same time is there already, as
        after a retried activity) and forget the agent's points older than
        `KEEP_DAYS` before it."""
        at = require_aware(point.at, "point.at")
        values: dict[str, Any] = {"agent_id": agent_id, **point.model_dump(), "at": at}
        table = table_of(DemandPointRow)
        with self._engine.begin() as conn:
            added = conn.execute(
                self._insert_ignoring_conflict(DemandPointRow, ["agent_id", "at"], values)
            ).rowcount
            conn.execute(
                delete(table).where(
                    (table.c.agent_id == agent_id) & (table.c.at < at - timedelta(days=KEEP_DAYS))
                )
            )
        return bool(added)

    def samples(
        self, agent_id: str, windows: Sequence[tuple[datetime, datetime]]
    ) -> list[DemandSample]:
        """The agent's points inside any of `windows` ([start, end]), as the
        forecast reads them, oldest first."""
        if not windows:
            return []
        table = table_of(DemandPointRow)
        inside = or_(*(and_(table.c.at >= s, table.c.at <= e) for s, e in windows))
        cols = [table.c[name] for name in _SAMPLE_COLUMNS]
        stmt = select(*cols).where((table.c.agent_id == agent_id) & inside).order_by(table.c.at)
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [DemandSample.model_validate(dict(row._mapping)) for row in rows]

    def series(self, agent_id: str, since: datetime, limit: int = 5_000) -> list[DemandPoint]:
        """The agent's points from `since` on, oldest first; at most `limit`
        (the latest), so a plot of a day stays small."""
        table = table_of(DemandPointRow)
        stmt = (
            select(table)
            .where((table.c.agent_id == agent_id) & (table.c.at >= require_aware(since, "since")))
            .order_by(table.c.at.desc())
            .limit(limit)
        )
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        return [_point(row._mapping) for row in reversed(rows)]

    def latest(self, agent_id: str) -> DemandPoint | None:
        """The agent's last point, or None before its first reading."""
        table = table_of(DemandPointRow)
        stmt = (
            select(table).where(table.c.agent_id == agent_id).order_by(table.c.at.desc()).limit(1)
        )
        with self._engine.connect() as conn:
            row = conn.execute(stmt).first()
        return _point(row._mapping) if row is not None else None


def _point(row: Any) -> DemandPoint:
    fields = {k: row[k] for k in DemandPoint.model_fields}
    return DemandPoint.model_validate(fields)
