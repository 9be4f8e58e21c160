"""A column type that keeps every timestamp a timezone-aware UTC `datetime`.

PostgreSQL stores `timestamptz` natively but hands values back in the
session's time zone; SQLite has no time zone support at all and returns naive
values. This type normalises both directions so callers only ever see aware
UTC datetimes, whatever the backend or the connection's settings.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.engine import Dialect
from sqlalchemy.types import DateTime, TypeDecorator

__all__ = ["UTCDateTime", "require_aware"]


def require_aware(value: datetime, name: str = "datetime") -> datetime:
    """`value` itself, or `ValueError` if it is naive.

    A naive datetime is ambiguous (local time? UTC?); guessing would silently
    shift history, so it is refused at the boundary.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware (UTC), got naive {value!r}")
    return value


class UTCDateTime(TypeDecorator[datetime]):
    """`DateTime(timezone=True)` that rejects naive input and returns aware UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        # Store methods check first for a clear error; this is the safety net
        # for any other writer.
        value = require_aware(value).astimezone(UTC)
        if dialect.name == "sqlite":
            # SQLite's DATETIME ignores tzinfo when formatting; store plain UTC.
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            # Only SQLite gets here: everything was written as UTC.
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
