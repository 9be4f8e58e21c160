"""Engine creation for the store: SQLite for local use, PostgreSQL in production.

Two production faults shape this module:

- A SQLite store is never created by opening it. Every connection opens the
  file with `mode=rw`, so a missing file is an error instead of a new, empty
  store; `create_sqlite_file` is the one explicit step that creates it. A file
  deleted while connections are pooled is noticed on checkout too: those
  connections would otherwise keep writing into the unlinked inode.
- A PostgreSQL outage fails fast instead of hanging: connects, pool waits and
  vanished hosts are all bounded, so a store call fails within seconds and the
  activity is retried by Temporal; pooled connections are pinged on checkout,
  so the store comes back by itself when the database does.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

from fleet_agent.env.local_stack import (
    DEFAULT_TEMPORAL_PORT,
    TEMPORAL_PORT_ENV,
    env_port,
    stack_paths,
)

__all__ = [
    "DATABASE_URL_ENV",
    "PG_CONNECT_TIMEOUT",
    "POOL_TIMEOUT",
    "create_engine_for",
    "create_sqlite_file",
    "default_database_url",
    "redacted_url",
    "sqlite_path",
]

DATABASE_URL_ENV = "FLEET_DATABASE_URL"

# Seconds. A store call with the database unreachable fails after at most
# about PG_CONNECT_TIMEOUT (connect) or POOL_TIMEOUT (every pooled connection
# busy); Temporal then retries the activity.
PG_CONNECT_TIMEOUT = 5
POOL_TIMEOUT = 5.0

# libpq settings that bound a connection whose peer vanished (host down,
# network cut): keepalives notice a silent peer within ~9 s of idle waiting,
# tcp_user_timeout (ms) fails a send that is never acknowledged.
_PG_LIVENESS = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 2,
    "tcp_user_timeout": 10_000,
}

# Applied on every new SQLite connection. busy_timeout comes first so that the
# switch to WAL (which needs a lock the first time) waits instead of failing
# when several threads open connections at once.
_SQLITE_PRAGMAS = (
    "PRAGMA busy_timeout=10000",
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA synchronous=NORMAL",
)

# Key in a pooled connection's `info`: (st_dev, st_ino) of the file it opened.
_FILE_ID = "fleet_agent_sqlite_file_id"


def default_database_url(*, make_folder: bool = True) -> str:
    """Where the run log is: `$FLEET_DATABASE_URL`, else the local stack's SQLite file.

    The one answer for the worker, the CLI and the console. The file is
    `./var/fleet-agent.db` for the default stack, and the stack's own folder
    for one on another `$TEMPORAL_PORT` (fleet_agent/env/local_stack.py), so the
    `TEMPORAL_PORT=7300 fleet-agent ask …` that `make run TEMPORAL_PORT=7300`
    prints reads that stack's run log. `make_folder` creates the file's folder
    (the worker's store is made there); readers pass False so that a wrong
    guess leaves nothing behind.
    """
    url = os.environ.get(DATABASE_URL_ENV, "").strip()
    if url:
        return url
    paths = stack_paths(env_port(TEMPORAL_PORT_ENV) or DEFAULT_TEMPORAL_PORT)
    if make_folder:
        paths.store.parent.mkdir(parents=True, exist_ok=True)
    return paths.store_url


def redacted_url(url: str | URL) -> str:
    """The URL with its password masked, safe for logs and error messages."""
    return make_url(url).render_as_string(hide_password=True)


def sqlite_path(url: str | URL) -> Path | None:
    """The absolute file of a SQLite URL; None for any other backend."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    if parsed.database in (None, "", ":memory:") or "mode=memory" in str(parsed):
        # Each in-memory connection is its own database, and one shared
        # connection is not safe across threads: use a (temporary) file.
        raise ValueError("in-memory SQLite is not supported by the store; use a file")
    if parsed.query:
        raise ValueError(
            "SQLite URL options are not supported by the store "
            f"(it opens the file itself): {redacted_url(parsed)}"
        )
    return Path(parsed.database).absolute()


def create_sqlite_file(path: Path) -> bool:
    """Create an empty SQLite database at `path` if none is there; True if it was created.

    The explicit step that makes a new store: the engine never creates one.
    The folder must exist.
    """
    if path.exists():
        return False
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot create the store {path}: its folder does not exist")
    conn = sqlite3.connect(path)
    try:
        # WAL is a property of the file: set it once here, before concurrent
        # connections, where switching could fail with "database is locked".
        conn.execute("PRAGMA journal_mode=WAL")
    finally:
        conn.close()
    return True


def create_engine_for(url: str, *, connect_args: dict[str, Any] | None = None) -> Engine:
    """An engine for a SQLite or PostgreSQL (psycopg 3) URL, tuned for the store.

    `connect_args` is passed to the DB-API driver, e.g. PostgreSQL
    `{"options": "-csearch_path=my_schema"}` to isolate tests in a schema; it
    wins over the defaults here (e.g. `connect_timeout`).
    """
    parsed = make_url(url)
    args: dict[str, Any] = dict(connect_args or {})
    backend = parsed.get_backend_name()

    if backend == "sqlite":
        path = sqlite_path(parsed)
        assert path is not None
        return _sqlite_engine(parsed, path, args)

    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            # Only psycopg 3 is a dependency; never fall back to psycopg2.
            parsed = parsed.set(drivername="postgresql+psycopg")
        args.setdefault("connect_timeout", PG_CONNECT_TIMEOUT)
        for key, value in _PG_LIVENESS.items():
            args.setdefault(key, value)
        # Connections die across database restarts and idle timeouts; a cheap
        # ping on checkout beats failing an activity attempt.
        return create_engine(
            parsed, connect_args=args, pool_pre_ping=True, pool_timeout=POOL_TIMEOUT
        )

    raise ValueError(f"unsupported database URL for the store: {redacted_url(url)}")


def _sqlite_engine(url: URL, path: Path, args: dict[str, Any]) -> Engine:
    # Temporal runs sync activities in a thread pool: connections move
    # between threads, which the pool already serialises.
    args.setdefault("check_same_thread", False)
    # `mode=rw`: open an existing database, never create one.
    uri = f"file:{quote(str(path))}?mode=rw"

    def connect() -> sqlite3.Connection:
        conn: sqlite3.Connection = sqlite3.connect(uri, uri=True, **args)
        return conn

    engine = create_engine(url, creator=connect, pool_timeout=POOL_TIMEOUT)
    event.listen(engine, "connect", _apply_sqlite_pragmas)
    event.listen(engine, "connect", _remember_file(path))
    event.listen(engine, "checkout", _check_file(path))
    return engine


def _file_id(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def _remember_file(path: Path) -> Any:
    def remember(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_FILE_ID] = _file_id(path)

    return remember


def _check_file(path: Path) -> Any:
    """A pooled connection to a file that was deleted or replaced is discarded.

    The pool then opens a new connection, which fails (`mode=rw`) while the
    file is gone, or opens the file now at that path.
    """

    def check(_dbapi: Any, record: ConnectionPoolEntry, _proxy: PoolProxiedConnection) -> None:
        if _file_id(path) != record.info.get(_FILE_ID):
            raise DisconnectionError(f"the SQLite file {path} was deleted or replaced")

    return check


def _apply_sqlite_pragmas(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    try:
        for pragma in _SQLITE_PRAGMAS:
            cursor.execute(pragma)
    finally:
        cursor.close()
