"""The notification table: one row per (idempotency key, destination), so a
retried or replayed delivery sends nothing twice (notifications.py).
Split from tables.py by purpose; tables.py lists it in `all_tables`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from .timestamps import UTCDateTime

__all__ = ["NOTIFICATIONS_TABLE", "NotificationRow"]

NOTIFICATIONS_TABLE = "fa_notifications"


class NotificationRow(SQLModel, table=True):
    """A delivery of one notification to one destination. `destination` is a
    keyed hash of its URL (never the URL: it is a secret;
    fleet_agent/notify/destinations.py); `status` is
    claimed (being sent), sent or failed (a retry may claim it again)."""

    __tablename__ = NOTIFICATIONS_TABLE
    __table_args__ = (
        UniqueConstraint("key", "destination", name="uq_fa_notifications_key_destination"),
    )

    id: int | None = Field(default=None, primary_key=True)
    key: str
    destination: str
    agent_id: str = Field(index=True)
    kind: str
    status: str
    error: str = Field(default="", sa_type=Text)
    updated_at: datetime = Field(sa_type=UTCDateTime)
