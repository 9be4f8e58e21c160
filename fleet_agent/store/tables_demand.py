"""Demand history (`fa_demand_points`): one row per reading of an agent's
demand source and the target decided on it (fleet_agent/demand/point.py).
Split from tables.py by purpose; tables.py lists it in `all_tables`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from .timestamps import UTCDateTime

__all__ = ["DEMAND_POINTS_TABLE", "DemandPointRow"]

DEMAND_POINTS_TABLE = "fa_demand_points"


class DemandPointRow(SQLModel, table=True):
    """A reading (`at`: the source's time) and the decision on it. The
    natural key (agent, at) makes a retried write a no-op."""

    __tablename__ = DEMAND_POINTS_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "at", name="uq_fa_demand_points_agent_at"),
        Index("ix_fa_demand_points_agent_at", "agent_id", "at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    at: datetime = Field(sa_type=UTCDateTime)
    queued: int = 0
    in_flight: int = 0
    arrived_total: int = Field(default=0, sa_type=BigInteger)
    done_total: int = Field(default=0, sa_type=BigInteger)
    late_total: int = Field(default=0, sa_type=BigInteger)
    saturated: bool = False
    recent_per_h: float | None = None
    forecast_per_h: float = 0.0
    need_per_h: float = 0.0
    target_per_h: float = 0.0
    capacity_per_h: float = 0.0
    at_risk: int = 0
    action: str = "hold"
    reason: str = Field(default="", sa_type=Text)
