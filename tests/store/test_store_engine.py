"""The store's engine: SQLite pragmas, database URLs (redacted, defaulted,
refused) and the drivers they pick."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet_agent.store import Store, create_engine_for, default_database_url, redacted_url
from tests.helpers.store_backends import sqlite_store_at


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = sqlite_store_at(tmp_path)
    yield store
    store.dispose()


def test_sqlite_pragmas(sqlite_store: Store) -> None:
    with sqlite_store.engine.connect() as conn:

        def pragma(name: str) -> object:
            return conn.exec_driver_sql(f"PRAGMA {name}").scalar()

        assert pragma("journal_mode") == "wal"
        assert pragma("busy_timeout") == 10000
        assert pragma("foreign_keys") == 1
        assert pragma("synchronous") == 1  # NORMAL


def test_redacted_url_hides_the_password() -> None:
    url = "postgresql+psycopg://fleet:s3cr3t-pw@db.example:5432/fleet"
    redacted = redacted_url(url)
    assert "s3cr3t-pw" not in redacted
    assert redacted == "postgresql+psycopg://fleet:***@db.example:5432/fleet"
    store = Store(url)  # no connection is made until first use
    try:
        assert "s3cr3t-pw" not in repr(store)
        assert "db.example" in repr(store)
    finally:
        store.dispose()


def test_plain_postgresql_url_uses_psycopg() -> None:
    engine = create_engine_for("postgresql://u@localhost/db")
    try:
        assert engine.url.drivername == "postgresql+psycopg"
    finally:
        engine.dispose()


def test_unsupported_url_is_rejected_without_leaking_password() -> None:
    with pytest.raises(ValueError) as excinfo:
        create_engine_for("mysql://u:hunter2@localhost/db")
    assert "hunter2" not in str(excinfo.value)


def test_default_database_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TEMPORAL_PORT", raising=False)  # another port: another store
    monkeypatch.setenv("FLEET_DATABASE_URL", "postgresql+psycopg://x@h/db")
    assert default_database_url() == "postgresql+psycopg://x@h/db"
    assert not (tmp_path / "var").exists()

    monkeypatch.delenv("FLEET_DATABASE_URL")
    assert default_database_url() == f"sqlite:///{tmp_path / 'var' / 'fleet-agent.db'}"
    assert (tmp_path / "var").is_dir()


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_in_memory_sqlite_is_rejected(url: str) -> None:
    with pytest.raises(ValueError, match="in-memory"):
        Store(url)
