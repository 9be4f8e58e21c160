"""The fleet's tables read by those without vast.ai access: the monitor's
last poll of each agent's fleet (the CLI's `fleet`, the console), and the
proofs its provers finished per UTC day (the daily digest). Split from
tables.py by purpose; tables.py lists them in `all_tables`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from .timestamps import UTCDateTime

__all__ = ["FLEET_SNAPSHOTS_TABLE", "PROOF_DAYS_TABLE", "FleetSnapshotRow", "ProofDayRow"]

FLEET_SNAPSHOTS_TABLE = "fa_fleet_snapshots"
PROOF_DAYS_TABLE = "fa_proof_days"


class FleetSnapshotRow(SQLModel, table=True):
    """One agent's latest fleet snapshot (fleet_agent/fleet/snapshot.py) as
    JSON, rewritten at every successful poll of its monitor."""

    __tablename__ = FLEET_SNAPSHOTS_TABLE
    __table_args__ = (UniqueConstraint("agent_id", name="uq_fa_fleet_snapshots_agent"),)

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    data: str = Field(sa_type=Text)
    taken_at: datetime = Field(sa_type=UTCDateTime)


class ProofDayRow(SQLModel, table=True):
    """The proofs one agent's provers finished in one UTC day (`day`:
    YYYY-MM-DD), summed by the monitor's polls from each prover's
    `proofs_completed` counter (fleet_agent/store/proof_days.py)."""

    __tablename__ = PROOF_DAYS_TABLE
    __table_args__ = (UniqueConstraint("agent_id", "day", name="uq_fa_proof_days_agent_day"),)

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    day: str
    proofs: int = 0
    updated_at: datetime = Field(sa_type=UTCDateTime)
