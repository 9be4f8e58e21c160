"""Fleet snapshots (`fa_fleet_snapshots`): the monitor's last poll, for readers.

The monitor's poll activity writes one row per agent (an upsert), and the
CLI's `fleet` view and the console read it, so that showing the fleet never
needs the worker's vast.ai key nor spends its rate limit. A table that is
only added needs no schema version (schema.py).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict
from sqlalchemy import select

from fleet_agent.fleet.snapshot import FleetSnapshot

from .base import Repository
from .tables import FleetSnapshotRow, table_of
from .timestamps import require_aware

__all__ = ["FleetSnapshots", "StoredSnapshot"]


class StoredSnapshot(BaseModel):
    """A snapshot and when the monitor took it."""

    model_config = ConfigDict(frozen=True)

    taken_at: datetime
    snapshot: FleetSnapshot


class FleetSnapshots(Repository):
    """Reads and writes `fa_fleet_snapshots` through a `Store`'s engine (synchronous)."""

    def save(self, agent_id: str, snapshot: FleetSnapshot, at: datetime) -> None:
        """Make `snapshot`, taken `at`, the agent's latest (one statement)."""
        values = {
            "agent_id": agent_id,
            "data": snapshot.model_dump_json(exclude_defaults=True),
            "taken_at": require_aware(at, "at"),
        }
        stmt = self._insert(table_of(FleetSnapshotRow)).values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=["agent_id"], set_={"data": values["data"], "taken_at": at}
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def latest(self, agent_id: str) -> StoredSnapshot | None:
        """The agent's latest snapshot, or None before its monitor's first poll."""
        table = table_of(FleetSnapshotRow)
        stmt = select(table.c.data, table.c.taken_at).where(table.c.agent_id == agent_id)
        with self._engine.connect() as conn:
            row = conn.execute(stmt).first()
        if row is None:
            return None
        return StoredSnapshot(
            taken_at=row.taken_at, snapshot=FleetSnapshot.model_validate_json(row.data)
        )
