"""The agent config table: each agent's last known config, kept for the
watchdog (fleet_agent/store/agent_configs.py). Split from tables.py by
purpose; tables.py lists it in `all_tables`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from .timestamps import UTCDateTime

__all__ = ["AGENT_CONFIGS_TABLE", "AgentConfigRow"]

AGENT_CONFIGS_TABLE = "fa_agent_configs"


class AgentConfigRow(SQLModel, table=True):
    """One agent's last known config, as JSON."""

    __tablename__ = AGENT_CONFIGS_TABLE
    __table_args__ = (UniqueConstraint("agent_id", name="uq_fa_agent_configs_agent"),)

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    data: str = Field(sa_type=Text)
    updated_at: datetime = Field(sa_type=UTCDateTime)
