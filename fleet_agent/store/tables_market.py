"""Market history (`fa_market_points`): one row per reading of an agent's
Curio node on the Snark Market (a `MarketPoint` as JSON: fleet_agent/market/point.py).
Split from tables.py by purpose; tables.py lists it in `all_tables`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from .timestamps import UTCDateTime

__all__ = ["MARKET_POINTS_TABLE", "MarketPointRow"]

MARKET_POINTS_TABLE = "fa_market_points"


class MarketPointRow(SQLModel, table=True):
    """A reading (`at`: the reading's time) and what the agent made of it. The
    natural key (agent, at) makes a retried write a no-op."""

    __tablename__ = MARKET_POINTS_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "at", name="uq_fa_market_points_agent_at"),
        Index("ix_fa_market_points_agent_at", "agent_id", "at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    at: datetime = Field(sa_type=UTCDateTime)
    data: str = Field(sa_type=Text)
