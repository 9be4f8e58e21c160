"""A missing store is an error: never created by opening it, never recreated under a worker.

Plus the decision a worker makes at start (`store_refusal`) and its switch
`FLEET_NEW_STORE`. The worker itself refusing is tested in test_worker_store.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.exc import OperationalError

from fleet_agent.config.settings import Settings
from fleet_agent.store import SCHEMA_VERSION, Store, StoreCondition, store_refusal

T0 = datetime(2025, 3, 4, tzinfo=UTC)


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "var"
    path.mkdir()
    return path


@pytest.fixture
def live(folder: Path) -> Iterator[Store]:
    """A created store with one run, its connections pooled."""
    store = Store(f"sqlite:///{folder / 'fleet.db'}")
    store.create_all()
    store.run_writes.begin_run("a", 1, 1, [], "b", T0)
    yield store
    store.dispose()


def test_opening_a_missing_sqlite_store_creates_nothing(folder: Path) -> None:
    store = Store(f"sqlite:///{folder / 'fleet.db'}")
    try:
        assert store.condition() == StoreCondition(exists=False, version=None)
        with pytest.raises(OperationalError, match="unable to open database file"):
            store.run_reads.count_runs("a")
        with pytest.raises(OperationalError, match="unable to open database file"):
            store.run_writes.begin_run("a", 1, 1, [], "b", T0)
        assert _files(folder) == []

        assert store.create_all() is None  # the explicit step
        assert store.condition() == StoreCondition(exists=True, version=SCHEMA_VERSION)
        assert store.run_reads.count_runs("a") == 0
    finally:
        store.dispose()


def test_an_empty_sqlite_file_is_an_empty_store(folder: Path) -> None:
    sqlite3.connect(folder / "fleet.db").close()
    store = Store(f"sqlite:///{folder / 'fleet.db'}")
    try:
        assert store.condition() == StoreCondition(exists=True, version=None)
        assert store.condition().empty
    finally:
        store.dispose()


def test_a_store_deleted_under_a_running_worker_is_not_recreated(live: Store, folder: Path) -> None:
    assert "fleet.db" in _files(folder)
    for name in _files(folder):  # the database, its WAL and shared memory
        (folder / name).unlink()

    # Pooled connections still point at the deleted file: none may be used.
    for _ in range(3):
        with pytest.raises(OperationalError, match="unable to open database file"):
            live.run_writes.begin_run("a", 2, 1, [], "b", T0)
        with pytest.raises(OperationalError, match="unable to open database file"):
            live.run_reads.count_runs("a")
    assert _files(folder) == []
    assert live.condition() == StoreCondition(exists=False, version=None)


def test_a_store_replaced_under_a_running_worker_is_used_from_then_on(
    live: Store, folder: Path
) -> None:
    # An operator restores another copy of the store at the same path.
    other = Store(f"sqlite:///{folder / 'restored.db'}")
    other.create_all()
    other.run_writes.begin_run("a", 7, 1, [], "restored", T0)
    other.dispose()
    for suffix in ("", "-wal", "-shm"):
        (folder / f"fleet.db{suffix}").unlink(missing_ok=True)
    (folder / "restored.db").rename(folder / "fleet.db")

    assert [r.run for r in live.run_reads.list_runs("a")] == [7]


@pytest.mark.parametrize("name", ["with space.db", "q?mark.db", "hash#.db", "pct%20.db"])
def test_file_names_that_need_quoting_in_a_uri(folder: Path, name: str) -> None:
    url = f"sqlite:///{folder / name}".replace("%", "%25").replace("?", "%3F").replace("#", "%23")
    store = Store(url)
    try:
        store.create_all()
        store.run_writes.begin_run("a", 1, 1, [], "b", T0)
        assert store.run_reads.count_runs("a") == 1
        assert (folder / name).is_file()
        assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(name)) == []
    finally:
        store.dispose()


def test_sqlite_url_options_are_refused(folder: Path) -> None:
    with pytest.raises(ValueError, match="options are not supported"):
        Store(f"sqlite:///{folder / 'fleet.db'}?mode=rwc")


def test_a_relative_sqlite_path_is_fixed_when_opened(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    store = Store("sqlite:///relative.db")
    try:
        store.create_all()
        monkeypatch.chdir(folder.parent)  # a later chdir does not move the store
        store.run_writes.begin_run("a", 1, 1, [], "b", T0)
        assert store.run_reads.count_runs("a") == 1
        assert (folder / "relative.db").is_file()
    finally:
        store.dispose()


# ---------------------------------------------------------------- the start decision

MISSING = StoreCondition(exists=False, version=None)
EMPTY = StoreCondition(exists=True, version=None)
PRESENT = StoreCondition(exists=True, version=SCHEMA_VERSION)
OLD = StoreCondition(exists=True, version=1)
WHERE = "postgresql+psycopg://fleet:***@db:5432/fleet"


def _refusal(condition: StoreCondition, agents: list[str], **kw: object) -> str | None:
    return store_refusal(
        condition,
        where=WHERE,
        namespace="prod",
        agents=agents,
        allow_new=bool(kw.get("allow_new", False)),
        agents_unknown=str(kw.get("agents_unknown", "")),
    )


@pytest.mark.parametrize("condition", [PRESENT, OLD])
def test_an_existing_store_is_always_opened(condition: StoreCondition) -> None:
    assert _refusal(condition, ["fleet-agent"]) is None
    assert _refusal(condition, [], agents_unknown="visibility is down") is None


@pytest.mark.parametrize("condition", [MISSING, EMPTY])
def test_a_fresh_machine_creates_its_store(condition: StoreCondition) -> None:
    assert _refusal(condition, []) is None


@pytest.mark.parametrize(("condition", "what"), [(MISSING, "does not exist"), (EMPTY, "no fleet")])
def test_a_vanished_store_with_running_agents_is_refused(
    condition: StoreCondition, what: str
) -> None:
    message = _refusal(condition, ["fleet-agent", "gpu-west"])
    assert message is not None
    assert WHERE in message and what in message
    assert "2 agent(s)" in message and "'fleet-agent', 'gpu-west'" in message
    assert "namespace 'prod'" in message
    assert "--new-store" in message and "FLEET_NEW_STORE=1" in message
    assert _refusal(condition, ["fleet-agent"], allow_new=True) is None


def test_a_refusal_names_ten_agents_and_counts_all() -> None:
    message = _refusal(MISSING, [f"agent-{i}" for i in range(25)])
    assert message is not None
    assert "25 agent(s)" in message and "'agent-9'" in message and "'agent-10'" not in message
    assert "and 15 more" in message


def test_agents_that_cannot_be_listed_are_assumed_running() -> None:
    message = _refusal(MISSING, [], agents_unknown="listing workflows failed: unavailable")
    assert message is not None
    assert "could not be checked (listing workflows failed: unavailable)" in message
    assert _refusal(MISSING, [], agents_unknown="x", allow_new=True) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", True), ("true", True), ("YES", True), ("0", False), ("", False), ("no", False)],
)
def test_fleet_new_store_env(value: str, expected: bool) -> None:
    assert Settings.from_env({"FLEET_NEW_STORE": value}).new_store is expected
    assert Settings.from_env({}).new_store is False


@pytest.mark.parametrize("value", ["2", "maybe", "on please"])
def test_fleet_new_store_env_rejects_other_values(value: str) -> None:
    with pytest.raises(ValueError, match="FLEET_NEW_STORE must be 1 or 0"):
        Settings.from_env({"FLEET_NEW_STORE": value})


def test_create_all_needs_the_folder_of_the_sqlite_file(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'no-such-folder' / 'fleet.db'}")
    try:
        with pytest.raises(FileNotFoundError, match="its folder does not exist"):
            store.create_all()
        assert not (tmp_path / "no-such-folder").exists()
    finally:
        store.dispose()
