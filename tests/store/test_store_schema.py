"""Schema versioning: a new store, an old one migrated, a newer one refused.

A version 1 store (tests/helpers/store_schema_v1.py) is migrated and keeps every
record, and ends with the schema of a new store; a newer or unreadable version
is refused untouched; concurrent upgrades do the work once. Each later step:
tests/store/test_store_migrations.py.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import inspect, text

from fleet_agent.models import RunStatus, TokenUsage
from fleet_agent.store import SCHEMA_VERSION, SchemaError
from tests.helpers.store_backends import Backend, backend, in_threads
from tests.helpers.store_schema_v1 import T0, _build_v1, _finish, _schema

__all__ = ["backend"]  # the fixture, imported for pytest


def test_a_new_store_is_created_at_the_current_version(backend: Backend) -> None:
    store = backend.store()
    before = store.condition()
    assert before.empty
    assert before.exists is (backend.name == "postgres")

    assert store.create_all() is None  # there was no store
    after = store.condition()
    assert (after.exists, after.version) == (True, SCHEMA_VERSION)
    assert {"fa_meta", "fa_sessions", "fa_runs", "fa_messages", "fa_inbox"} <= set(
        inspect(store.engine).get_table_names()
    )
    assert store.create_all() == SCHEMA_VERSION  # again: nothing to do
    assert store.condition().version == SCHEMA_VERSION


def test_a_version_1_store_is_migrated_and_keeps_every_record(backend: Backend) -> None:
    _build_v1(backend)
    store = backend.store()
    assert store.condition().version == 1

    assert store.create_all() == 1
    assert store.condition().version == SCHEMA_VERSION

    first = store.run_reads.get_run("a", 1)
    assert first is not None
    assert (first.attempt, first.workflow_run_id, first.status) == (1, "", RunStatus.OK)
    assert first.started_at == T0 + timedelta(minutes=1)
    assert first.ended_at == T0 + timedelta(minutes=2)
    assert first.verdict is not None and first.verdict.action
    assert first.usage == TokenUsage(
        input_tokens=10,
        output_tokens=20,
        cache_read_input_tokens=30,
        cache_creation_input_tokens=40,
    )
    assert (first.final_text, first.actions_digest, first.rounds) == ("final 1", "digest 1", 3)
    assert first.estimated_prompt_tokens == 999
    assert [t.text for t in first.triggers] == ["hi"]
    assert [m.content for m in store.messages.run_messages("a", 1)] == ["reply"]
    assert [s.reason for s in store.sessions.list_sessions("a")] == ["agent started"]
    assert store.run_reads.latest_counters("a") == (2, 1)

    # The old row of run 2 was written without a workflow run ID: it is the
    # attempt that run's own (upgraded) workflow closes.
    _finish(store, 2, workflow_run_id="wf-after-upgrade")
    second = store.run_reads.get_run("a", 2)
    assert second is not None and (second.attempt, second.status) == (1, RunStatus.OK)

    # The unique key is (agent, run, attempt) now: a replay opens attempt 2.
    assert (
        store.run_writes.begin_run("a", 1, 1, [], "replay", T0 + timedelta(days=1), "wf-replay")
        == 2
    )
    assert [r.attempt for r in store.run_reads.run_attempts("a", 1)] == [1, 2]
    # New rows get fresh ids after the copied ones (SQLite rebuilt the table).
    store.sessions.ensure_session("a", 2, "reset", T0)
    store.run_writes.begin_run("a", 3, 2, [], "b", T0, "wf-3")
    assert store.run_reads.get_run("a", 3) is not None


def test_a_migrated_store_has_the_schema_of_a_new_one(
    backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _build_v1(backend, rows=False)
    migrated = backend.store()
    migrated.create_all()

    fresh_backend = Backend(
        "sqlite", f"sqlite:///{tmp_path_factory.mktemp('fresh') / 'fresh.db'}", {}
    )
    if backend.name == "sqlite":
        fresh = fresh_backend.store()
        fresh.create_all()
        try:
            assert _schema(migrated) == _schema(fresh)
        finally:
            fresh_backend.close()
        return
    # PostgreSQL: compare with a new store in a second schema of the same server.
    schema = f"fa_test_{uuid.uuid4().hex}"
    with backend.engine().begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        other = Backend("postgres", backend.url, {"options": f"-csearch_path={schema}"})
        try:
            fresh = other.store()
            fresh.create_all()
            assert _schema(migrated) == _schema(fresh)
        finally:
            other.close()
    finally:
        with backend.engine().begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))


def test_a_newer_store_is_refused_untouched(backend: Backend) -> None:
    store = backend.store()
    store.create_all()
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE fa_meta SET value = :v"), {"v": str(SCHEMA_VERSION + 1)})
    store.run_writes.begin_run("a", 1, 1, [], "b", T0)

    with pytest.raises(SchemaError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        store.create_all()
    assert store.condition().version == SCHEMA_VERSION + 1
    assert store.run_reads.count_runs("a") == 1


def test_an_unreadable_version_is_an_error(backend: Backend) -> None:
    store = backend.store()
    store.create_all()
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE fa_meta SET value = 'two'"))
    with pytest.raises(SchemaError, match="no valid schema_version"):
        store.condition()
    with pytest.raises(SchemaError, match="no valid schema_version"):
        store.create_all()


def test_concurrent_upgrades_do_the_work_once(backend: Backend) -> None:
    _build_v1(backend)
    stores = [backend.store() for _ in range(4)]
    found = in_threads(len(stores), lambda i: stores[i].create_all())
    # Exactly one caller migrated version 1; the others found it done.
    assert sorted(v or 0 for v in found) == sorted([1] + [SCHEMA_VERSION] * 3)
    assert [r.attempt for r in stores[0].run_reads.run_attempts("a", 1)] == [1]
