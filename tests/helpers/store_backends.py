"""Blank databases on SQLite and PostgreSQL for store tests that start from nothing.

`backend` (a fixture; import it into a test module) gives a `Backend`: where a
new store would live, not created. On PostgreSQL each test gets its own
schema, dropped afterwards; when the server is unreachable the test fails,
unless FLEET_SKIP_POSTGRES=1.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from fleet_agent.store import Store, create_engine_for, redacted_url
from tests.conftest import postgres_url

__all__ = [
    "Backend",
    "backend",
    "in_threads",
    "require_postgres",
    "sqlite_store_at",
    "store_on_both_backends",
]

_T = TypeVar("_T")


def in_threads(n: int, fn: Callable[[int], _T]) -> list[_T]:
    """Run fn(0..n-1) in n threads released together by a barrier."""
    barrier = threading.Barrier(n)

    def start(i: int) -> _T:
        barrier.wait(timeout=30)
        return fn(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(start, range(n)))


def require_postgres() -> None:
    """Fail (or skip, with FLEET_SKIP_POSTGRES=1) when PostgreSQL is unreachable."""
    admin = create_engine_for(postgres_url(), connect_args={"connect_timeout": 3})
    try:
        with admin.connect():
            pass
    except OperationalError as exc:
        if os.environ.get("FLEET_SKIP_POSTGRES") == "1":
            pytest.skip(f"PostgreSQL unreachable at {redacted_url(postgres_url())}")
        pytest.fail(
            f"PostgreSQL unreachable at {redacted_url(postgres_url())} ({exc.orig}); "
            "set FLEET_SKIP_POSTGRES=1 to skip"
        )
    finally:
        admin.dispose()


class Backend:
    """One blank database; every engine and store it hands out is disposed at teardown."""

    def __init__(self, name: str, url: str, connect_args: dict[str, Any]) -> None:
        self.name = name
        self.url = url
        self.connect_args = connect_args
        self._engines: list[Engine] = []
        self._stores: list[Store] = []

    def engine(self) -> Engine:
        engine = create_engine_for(self.url, connect_args=self.connect_args)
        self._engines.append(engine)
        return engine

    def store(self) -> Store:
        """A new `Store` on this database (nothing is created)."""
        store = Store(self.url) if self.name == "sqlite" else Store(engine=self.engine())
        self._stores.append(store)
        return store

    def execute_script(self, statements: list[str]) -> None:
        """Run raw SQL (e.g. an old schema's DDL) outside the store's code."""
        if self.name == "sqlite":
            db = sqlite3.connect(Path(self.url.removeprefix("sqlite:///")))
            try:
                db.execute("PRAGMA journal_mode=WAL")  # as every store file has been
                db.executescript(";\n".join(statements) + ";")
                db.commit()
            finally:
                db.close()
            return
        with self.engine().begin() as conn:
            for stmt in statements:
                conn.exec_driver_sql(stmt)

    def close(self) -> None:
        for store in self._stores:
            store.dispose()
        for engine in self._engines:
            engine.dispose()


def _postgres_backend() -> Iterator[Backend]:
    require_postgres()
    admin = create_engine_for(postgres_url())
    schema = f"fa_test_{uuid.uuid4().hex}"
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    backend = Backend("postgres", postgres_url(), {"options": f"-csearch_path={schema}"})
    try:
        yield backend
    finally:
        backend.close()
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "sqlite":
        sqlite_backend = Backend("sqlite", f"sqlite:///{tmp_path / 'store.db'}", {})
        yield sqlite_backend
        sqlite_backend.close()
    else:
        yield from _postgres_backend()


# ---------------------------------------------------------------- a store on both backends

# A session time zone far from UTC proves values are converted, not just relabelled.
PG_SESSION_TIMEZONE = "Asia/Kolkata"


def sqlite_store_at(tmp_path: Path) -> Store:
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    store.create_all()
    return store


def _postgres_store() -> Iterator[Store]:
    admin = create_engine_for(postgres_url(), connect_args={"connect_timeout": 3})
    try:
        with admin.connect():
            pass
    except OperationalError as exc:
        admin.dispose()
        if os.environ.get("FLEET_SKIP_POSTGRES") == "1":
            pytest.skip(f"PostgreSQL unreachable at {redacted_url(postgres_url())}")
        pytest.fail(
            f"PostgreSQL unreachable at {redacted_url(postgres_url())} ({exc.orig}); "
            "set FLEET_SKIP_POSTGRES=1 to skip"
        )
    schema = f"fa_test_{uuid.uuid4().hex}"
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    engine = create_engine_for(
        postgres_url(),
        connect_args={"options": f"-csearch_path={schema} -ctimezone={PG_SESSION_TIMEZONE}"},
    )
    try:
        store = Store(engine=engine)
        store.create_all()
        yield store
    finally:
        engine.dispose()
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(
    name="store", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def store_on_both_backends(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """`store`, on SQLite and on PostgreSQL: import this name into a test module."""
    if request.param == "sqlite":
        sqlite_store = sqlite_store_at(tmp_path)
        yield sqlite_store
        sqlite_store.dispose()
    else:
        yield from _postgres_store()
