"""Hosts that failed (`fa_failed_hosts`): not rented again for a while.

A machine that exited, went offline, never finished loading or stopped
proving says something about its host. The fleet code remembers the host's
`machine_id` (and `host_id`) for a time to live and leaves its offers out of
every search, so the agent does not rent the same broken host again and
again. A host that fails again extends its own entry.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, select
from sqlmodel import col

from .base import Repository
from .tables import FailedHostRow, table_of
from .timestamps import require_aware

__all__ = ["FailedHost", "FailedHosts"]


class FailedHost(BaseModel):
    """One remembered host."""

    model_config = ConfigDict(frozen=True)

    machine_id: int
    host_id: int | None
    reason: str
    failed_at: datetime
    until: datetime


class FailedHosts(Repository):
    """Reads and writes `fa_failed_hosts` through a `Store`'s engine (synchronous)."""

    def remember(
        self,
        agent_id: str,
        *,
        machine_id: int,
        host_id: int | None,
        reason: str,
        at: datetime,
        until: datetime,
    ) -> None:
        """Record a failure; a later failure of the same machine moves `until` on."""
        values = {
            "agent_id": agent_id,
            "machine_id": machine_id,
            "host_id": host_id,
            "reason": reason[:500],
            "failed_at": require_aware(at, "at"),
            "until": require_aware(until, "until"),
        }
        stmt = self._insert(table_of(FailedHostRow)).values(values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["agent_id", "machine_id"],
            set_={"host_id": host_id, "reason": values["reason"], "failed_at": at, "until": until},
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def active(self, agent_id: str, now: datetime) -> list[FailedHost]:
        """Hosts still remembered at `now`, most recent failure first."""
        table = table_of(FailedHostRow)
        stmt = (
            select(table)
            .where(
                table.c.agent_id == agent_id,
                table.c.until > require_aware(now, "now"),
            )
            .order_by(table.c.failed_at.desc())
        )
        with self._engine.connect() as conn:
            return [
                FailedHost(
                    machine_id=row.machine_id,
                    host_id=row.host_id,
                    reason=row.reason,
                    failed_at=row.failed_at,
                    until=row.until,
                )
                for row in conn.execute(stmt)
            ]

    def forget_expired(self, now: datetime) -> int:
        """Drop entries whose time is up (any agent); returns how many."""
        stmt = delete(FailedHostRow).where(col(FailedHostRow.until) <= require_aware(now, "now"))
        with self._engine.begin() as conn:
            return int(conn.execute(stmt).rowcount)
