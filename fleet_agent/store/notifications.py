"""Notification deliveries (`fa_notifications`): claim, then send, then record.

The delivery activity (activities/notify.py) claims the row of (key,
destination) before it sends: a claim that finds the row sent, or claimed by
another attempt, sends nothing. A failed send is recorded as failed, and a
retry may claim it again. An attempt that dies between its claim and its
record leaves the row claimed: that destination is not sent again (at most
once: a duplicate alert trains operators to ignore them).

A destination is named by a keyed hash of its URL
(fleet_agent/notify/destinations.py); `rename_destinations` moves the rows
of the unkeyed names written before to their keyed ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from sqlalchemy import and_, desc, exists, func, select, update

from .base import Repository
from .tables import table_of
from .tables_notify import NotificationRow
from .timestamps import require_aware

__all__ = ["Notifications"]

CLAIMED, SENT, FAILED = "claimed", "sent", "failed"


class Notifications(Repository):
    """Reads and writes `fa_notifications` through a `Store`'s engine (synchronous)."""

    def claim(self, key: str, destination: str, agent_id: str, kind: str, at: datetime) -> bool:
        """True if this caller may send (key, destination) now: a new row, or
        one whose last attempt failed. One transaction, so two attempts at once
        cannot both claim it."""
        table = table_of(NotificationRow)
        values = {
            "key": key,
            "destination": destination,
            "agent_id": agent_id,
            "kind": kind,
            "status": CLAIMED,
            "error": "",
            "updated_at": require_aware(at, "at"),
        }
        # RETURNING, not rowcount: psycopg reports no count for this insert.
        stmt = self._insert(table).values(**values).on_conflict_do_nothing().returning(table.c.id)
        with self._engine.begin() as conn:
            if conn.execute(stmt).first() is not None:
                return True
            again = (
                update(table)
                .where(
                    and_(
                        table.c.key == key,
                        table.c.destination == destination,
                        table.c.status == FAILED,
                    )
                )
                .values(status=CLAIMED, updated_at=at)
                .returning(table.c.id)
            )
            return conn.execute(again).first() is not None

    def record(self, key: str, destination: str, error: str, at: datetime) -> None:
        """The outcome of a claimed send: sent (`error` empty) or failed."""
        table = table_of(NotificationRow)
        stmt = (
            update(table)
            .where(and_(table.c.key == key, table.c.destination == destination))
            .values(status=FAILED if error else SENT, error=error[:1000], updated_at=at)
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def status_of(self, key: str) -> dict[str, str]:
        """destination → status of every row under `key` (tests, the CLI)."""
        table = table_of(NotificationRow)
        stmt = select(table.c.destination, table.c.status).where(table.c.key == key)
        with self._engine.connect() as conn:
            return {row.destination: row.status for row in conn.execute(stmt)}

    def recent_failures(self, agent_id: str, limit: int = 5) -> list[tuple[datetime, str, str]]:
        """(when, kind, error) of the agent's latest failed deliveries, newest first."""
        table = table_of(NotificationRow)
        stmt = (
            select(table.c.updated_at, table.c.kind, table.c.error)
            .where(and_(table.c.agent_id == agent_id, table.c.status == FAILED))
            .order_by(desc(table.c.updated_at))
            .limit(limit)
        )
        with self._engine.connect() as conn:
            return [(r.updated_at, r.kind, r.error) for r in conn.execute(stmt)]

    def rename_destinations(
        self,
        renames: Mapping[str, str],
        is_old: Callable[[str], bool],
        retire: Callable[[str], str],
    ) -> int:
        """Rows named by an old name take a new one: `renames[old]` for the
        destinations still configured, `retire(old)` for every other name
        `is_old` says is old. A row whose key already has a row under the
        new name (another worker claimed it meanwhile) is retired instead.
        Returns the rows renamed; idempotent (no old name is left)."""
        table = table_of(NotificationRow)
        other = table.alias("other")
        moved = 0
        with self._engine.begin() as conn:
            olds = {
                name
                for (name,) in conn.execute(
                    select(table.c.destination)
                    .where(func.length(table.c.destination) == 16)
                    .distinct()
                )
                if is_old(name)
            }
            for old in sorted(olds):
                if old in renames:
                    taken = exists().where(
                        and_(other.c.key == table.c.key, other.c.destination == renames[old])
                    )
                    stmt = (
                        update(table)
                        .where(and_(table.c.destination == old, ~taken))
                        .values(destination=renames[old])
                    )
                    moved += conn.execute(stmt).rowcount or 0
                stmt = (
                    update(table).where(table.c.destination == old).values(destination=retire(old))
                )
                moved += conn.execute(stmt).rowcount or 0
        return moved
