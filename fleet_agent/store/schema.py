"""The store's schema version, kept in `fa_meta`, and the migrations between versions.

Versions:
1. `fa_sessions`, `fa_runs` unique on (agent, run), `fa_messages`; no `fa_meta`
   (every store created before versioning).
2. `fa_meta`; `fa_runs` gains `attempt`, `workflow_run_id` and
   `stop_reasons` and is unique on (agent, run, attempt); `fa_inbox`.
3. `fa_runs` gains `cache_creation_1h_input_tokens` (default 0): the run's
   cache writes with the 1-hour TTL. Per round, usage is in the reply's JSON
   (`fa_messages`), which needed no change.
4. `fa_runs` gains the index `ix_fa_runs_agent_started` (agent, started_at):
   the LLM cost of today and of the last 24 h, read by every run.
5. `fa_tool_calls` gains the index `ix_fa_tool_calls_agent_name_run`.
6. `fa_runs` gains `thinking_tokens` (default 0): the part of the run's
   output tokens its model spent thinking.
7. `fa_tool_calls` gains `reserved_dph` (NULL): the price a create holds
   against the caps while it is in flight.
8. `fa_notifications`: one row per notification and destination, whose
   unique (key, destination) makes a delivery happen once (notifications.py).

A table that is only added (no change to an existing one) needs no new
version: `upgrade` creates every missing table of the current metadata.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from sqlalchemy import Connection, Engine, inspect, select, text
from sqlalchemy.dialects import postgresql, sqlite

from .tables import (
    META_TABLE,
    RUNS_TABLE,
    TOOL_CALLS_TABLE,
    MetaRow,
    NotificationRow,
    RunRow,
    all_tables,
    table_of,
)

__all__ = ["SCHEMA_VERSION", "SchemaError", "read_version", "upgrade"]

SCHEMA_VERSION = 8
VERSION_KEY = "schema_version"

# Tables of version 1: a database with any of them and no fa_meta is version 1.
_V1_TABLES = frozenset({"fa_sessions", "fa_runs", "fa_messages"})
# Serialises concurrent upgrades on PostgreSQL (two workers starting at once).
_PG_LOCK_KEY = 0x66612D736368656D  # "fa-schem"


class SchemaError(RuntimeError):
    """The store's schema cannot be used or upgraded by this code."""


def read_version(conn: Connection) -> int | None:
    """The schema version of the database; None when it has no fleet-agent tables."""
    tables = set(inspect(conn).get_table_names())
    if META_TABLE in tables:
        meta = table_of(MetaRow)
        value = conn.execute(
            select(meta.c.value).where(meta.c.key == VERSION_KEY)
        ).scalar_one_or_none()
        if value is None or not value.isdigit():
            raise SchemaError(f"the store's {META_TABLE} has no valid {VERSION_KEY}: {value!r}")
        return int(value)
    if tables & _V1_TABLES:
        return 1
    return None


def upgrade(engine: Engine) -> int | None:
    """Bring the database to `SCHEMA_VERSION`: create it, or migrate an older one.

    Returns the version found before (None: it had no tables). Runs in one
    transaction that excludes other writers, so concurrent callers do the work
    once. Raises `SchemaError` if the database is newer than this code.
    """
    with _exclusive(engine) as conn:
        found = read_version(conn)
        if found is not None and found > SCHEMA_VERSION:
            raise SchemaError(
                f"the store has schema version {found}, newer than this fleet-agent "
                f"(version {SCHEMA_VERSION}): upgrade fleet-agent"
            )
        for version in range(found or SCHEMA_VERSION, SCHEMA_VERSION):
            _MIGRATIONS[version](conn)
        RunRow.metadata.create_all(conn, tables=all_tables())
        if found != SCHEMA_VERSION:
            _write_version(conn, SCHEMA_VERSION)
        return found


@contextlib.contextmanager
def _exclusive(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction that holds the database's write lock."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
        else:
            # pysqlite starts transactions lazily and not for DDL: take the
            # write lock up front so the migration is atomic and exclusive.
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()


def _write_version(conn: Connection, version: int) -> None:
    meta = table_of(MetaRow)
    insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
    stmt = insert(meta).values(key=VERSION_KEY, value=str(version))
    conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={"value": str(version)}))


# ---------------------------------------------------------------- migrations


def _v1_to_v2(conn: Connection) -> None:
    """fa_runs: add `attempt` (1), `workflow_run_id` and `stop_reasons` (""), unique
    on (agent, run, attempt)."""
    if RUNS_TABLE not in inspect(conn).get_table_names():
        return  # create_all makes it at the current version
    if conn.dialect.name == "postgresql":
        for stmt in (
            "ALTER TABLE fa_runs ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1",
            "ALTER TABLE fa_runs ADD COLUMN workflow_run_id VARCHAR NOT NULL DEFAULT ''",
            "ALTER TABLE fa_runs ADD COLUMN stop_reasons TEXT NOT NULL DEFAULT ''",
            # The defaults only fill the existing rows: fresh tables have none.
            "ALTER TABLE fa_runs ALTER COLUMN attempt DROP DEFAULT",
            "ALTER TABLE fa_runs ALTER COLUMN workflow_run_id DROP DEFAULT",
            "ALTER TABLE fa_runs ALTER COLUMN stop_reasons DROP DEFAULT",
            "ALTER TABLE fa_runs DROP CONSTRAINT uq_fa_runs_agent_run",
            "ALTER TABLE fa_runs ADD CONSTRAINT uq_fa_runs_agent_run_attempt "
            "UNIQUE (agent_id, run, attempt)",
        ):
            conn.exec_driver_sql(stmt)
        return
    # SQLite cannot drop a table's constraint: rebuild the table.
    old_columns = {c["name"] for c in inspect(conn).get_columns(RUNS_TABLE)}
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_fa_runs_agent_session_run")
    conn.exec_driver_sql("ALTER TABLE fa_runs RENAME TO fa_runs_v1")
    table_of(RunRow).create(conn)
    kept = [c.name for c in table_of(RunRow).columns if c.name in old_columns]
    names = ", ".join(kept)
    conn.exec_driver_sql(
        f"INSERT INTO fa_runs ({names}, attempt, workflow_run_id, stop_reasons) "
        f"SELECT {names}, 1, '', '' FROM fa_runs_v1"
    )
    conn.exec_driver_sql("DROP TABLE fa_runs_v1")


def _v2_to_v3(conn: Connection) -> None:
    """fa_runs: add `cache_creation_1h_input_tokens`, 0 for the existing rows.

    The column keeps its default, as a new store's table has it (`tables.py`),
    so a migrated store and a new one have the same schema on both backends.
    """
    if RUNS_TABLE not in inspect(conn).get_table_names():
        return  # create_all makes it at the current version
    if "cache_creation_1h_input_tokens" in {
        c["name"] for c in inspect(conn).get_columns(RUNS_TABLE)
    }:
        return  # SQLite's version 1 → 2 rebuilt the table at the current version
    conn.exec_driver_sql(
        "ALTER TABLE fa_runs ADD COLUMN cache_creation_1h_input_tokens INTEGER NOT NULL DEFAULT '0'"
    )


def _v3_to_v4(conn: Connection) -> None:
    """fa_runs: index (agent_id, started_at), which the LLM cost of a window reads."""
    if RUNS_TABLE not in inspect(conn).get_table_names():
        return  # create_all makes it at the current version
    # IF NOT EXISTS: SQLite's version 1 → 2 rebuilt the table with every index.
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_fa_runs_agent_started ON fa_runs (agent_id, started_at)"
    )


def _v4_to_v5(conn: Connection) -> None:
    """fa_tool_calls: index (agent_id, name, run), which the fleet views read
    a fleet's temporary creates by (ToolJournal.temporary_creates)."""
    if TOOL_CALLS_TABLE not in inspect(conn).get_table_names():
        return  # create_all makes it at the current version
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_fa_tool_calls_agent_name_run "
        "ON fa_tool_calls (agent_id, name, run)"
    )


def _v5_to_v6(conn: Connection) -> None:
    """fa_runs: add `thinking_tokens`, 0 for the existing rows (kept as the
    column's default, as in a new store: see `_v2_to_v3`)."""
    if RUNS_TABLE not in inspect(conn).get_table_names():
        return  # create_all makes it at the current version
    if "thinking_tokens" in {c["name"] for c in inspect(conn).get_columns(RUNS_TABLE)}:
        return  # SQLite's version 1 → 2 rebuilt the table at the current version
    conn.exec_driver_sql(
        "ALTER TABLE fa_runs ADD COLUMN thinking_tokens INTEGER NOT NULL DEFAULT '0'"
    )


def _v6_to_v7(conn: Connection) -> None:
    """fa_tool_calls: add `reserved_dph`, NULL for the existing rows (a call
    from before holds the per-instance cap while in flight)."""
    if TOOL_CALLS_TABLE not in inspect(conn).get_table_names():
        return  # create_all makes it at the current version
    if "reserved_dph" in {c["name"] for c in inspect(conn).get_columns(TOOL_CALLS_TABLE)}:
        return
    conn.exec_driver_sql("ALTER TABLE fa_tool_calls ADD COLUMN reserved_dph FLOAT")


def _v7_to_v8(conn: Connection) -> None:
    """fa_notifications: created (with its unique key) by a version 8 worker;
    a version 7 store has no notifications to carry over."""
    table_of(NotificationRow).create(conn, checkfirst=True)


# _MIGRATIONS[n] takes a database from version n to n + 1.
_MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
}
