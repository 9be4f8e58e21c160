"""The fleet snapshot table: the monitor's last poll of each agent's fleet,
kept for readers without vast.ai access (the CLI's `fleet`, the console).
Split from tables.py by purpose; tables.py lists it in `all_tables`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from .timestamps import UTCDateTime

__all__ = ["FLEET_SNAPSHOTS_TABLE", "FleetSnapshotRow"]

FLEET_SNAPSHOTS_TABLE = "fa_fleet_snapshots"


class FleetSnapshotRow(SQLModel, table=True):
    """One agent's latest fleet snapshot (fleet_agent/fleet/snapshot.py) as
    JSON, rewritten at every successful poll of its monitor."""

    __tablename__ = FLEET_SNAPSHOTS_TABLE
    __table_args__ = (UniqueConstraint("agent_id", name="uq_fa_fleet_snapshots_agent"),)

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    data: str = Field(sa_type=Text)
    taken_at: datetime = Field(sa_type=UTCDateTime)
