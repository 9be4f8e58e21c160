"""Engine creation for the store: SQLite for local use, PostgreSQL in production."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import ConnectionPoolEntry

__all__ = [
    "DATABASE_URL_ENV",
    "create_engine_for",
    "default_database_url",
    "redacted_url",
]

DATABASE_URL_ENV = "FLEET_DATABASE_URL"

# Applied on every new SQLite connection. busy_timeout comes first so that the
# switch to WAL (which needs a lock the first time) waits instead of failing
# when several threads open connections at once.
_SQLITE_PRAGMAS = (
    "PRAGMA busy_timeout=10000",
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA synchronous=NORMAL",
)


def default_database_url() -> str:
    """`$FLEET_DATABASE_URL`, else a SQLite file in `./var/` (the folder is created)."""
    url = os.environ.get(DATABASE_URL_ENV, "").strip()
    if url:
        return url
    folder = Path.cwd() / "var"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'fleet-agent.db'}"


def redacted_url(url: str) -> str:
    """The URL with its password masked, safe for logs and error messages."""
    return make_url(url).render_as_string(hide_password=True)


def create_engine_for(url: str, *, connect_args: dict[str, Any] | None = None) -> Engine:
    """An engine for a SQLite or PostgreSQL (psycopg 3) URL, tuned for the store.

    `connect_args` is passed to the DB-API driver, e.g. PostgreSQL
    `{"options": "-csearch_path=my_schema"}` to isolate tests in a schema.
    """
    parsed = make_url(url)
    args: dict[str, Any] = dict(connect_args or {})
    backend = parsed.get_backend_name()

    if backend == "sqlite":
        # Temporal runs sync activities in a thread pool: connections move
        # between threads, which the pool already serialises.
        args.setdefault("check_same_thread", False)
        if parsed.database in (None, "", ":memory:") or "mode=memory" in str(parsed):
            # Each in-memory connection is its own database, and one shared
            # connection is not safe across threads: use a (temporary) file.
            raise ValueError("in-memory SQLite is not supported by the store; use a file")
        engine = create_engine(parsed, connect_args=args)
        event.listen(engine, "connect", _apply_sqlite_pragmas)
        return engine

    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            # Only psycopg 3 is a dependency; never fall back to psycopg2.
            parsed = parsed.set(drivername="postgresql+psycopg")
        # Connections die across database restarts and idle timeouts; a cheap
        # ping on checkout beats failing an activity attempt.
        return create_engine(parsed, connect_args=args, pool_pre_ping=True)

    raise ValueError(f"unsupported database URL for the store: {redacted_url(url)}")


def _apply_sqlite_pragmas(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    try:
        for pragma in _SQLITE_PRAGMAS:
            cursor.execute(pragma)
    finally:
        cursor.close()
