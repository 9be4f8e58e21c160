"""Schema versioning: a new store, an old one migrated, a newer one refused.

The old schema below is fixture data: the DDL that the store created before
versioning (schema version 1), copied here so the test keeps building exactly
that database whatever the code does later.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import inspect, text

from fleet_agent.models import RunStatus, TokenUsage, Trigger, TriggerKind
from fleet_agent.store import SCHEMA_VERSION, SchemaError, Store, ToolJournal
from tests.store_backends import Backend, backend, in_threads

__all__ = ["backend"]  # the fixture, imported for pytest

T0 = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)

# ---------------------------------------------------------------- schema version 1 (fixture)

_V1_TYPES = {
    "sqlite": {"serial": "INTEGER", "ts": "DATETIME"},
    "postgres": {"serial": "SERIAL", "ts": "TIMESTAMP WITH TIME ZONE"},
}

_V1_DDL = [
    """CREATE TABLE fa_sessions (
        id {serial} NOT NULL,
        agent_id VARCHAR NOT NULL,
        session INTEGER NOT NULL,
        started_at {ts} NOT NULL,
        reason TEXT NOT NULL,
        PRIMARY KEY (id),
        CONSTRAINT uq_fa_sessions_agent_session UNIQUE (agent_id, session)
    )""",
    """CREATE TABLE fa_runs (
        id {serial} NOT NULL,
        agent_id VARCHAR NOT NULL,
        run INTEGER NOT NULL,
        session INTEGER NOT NULL,
        status VARCHAR NOT NULL,
        triggers_json TEXT NOT NULL,
        trigger_block TEXT NOT NULL,
        started_at {ts} NOT NULL,
        ended_at {ts},
        verdict_action BOOLEAN,
        verdict_state_changed BOOLEAN,
        verdict_error VARCHAR NOT NULL,
        noop BOOLEAN NOT NULL,
        in_prompt BOOLEAN NOT NULL,
        error TEXT NOT NULL,
        final_text TEXT NOT NULL,
        actions_digest TEXT NOT NULL,
        mutating_calls INTEGER NOT NULL,
        tool_calls INTEGER NOT NULL,
        rounds INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cache_read_input_tokens INTEGER NOT NULL,
        cache_creation_input_tokens INTEGER NOT NULL,
        llm_seconds FLOAT NOT NULL,
        history_runs_included INTEGER NOT NULL,
        history_runs_dropped INTEGER NOT NULL,
        estimated_prompt_tokens INTEGER NOT NULL,
        PRIMARY KEY (id),
        CONSTRAINT uq_fa_runs_agent_run UNIQUE (agent_id, run)
    )""",
    "CREATE INDEX ix_fa_runs_agent_session_run ON fa_runs (agent_id, session, run)",
    """CREATE TABLE fa_messages (
        id {serial} NOT NULL,
        agent_id VARCHAR NOT NULL,
        run INTEGER NOT NULL,
        seq INTEGER NOT NULL,
        round INTEGER NOT NULL,
        role VARCHAR NOT NULL,
        kind VARCHAR NOT NULL,
        content TEXT NOT NULL,
        in_prompt BOOLEAN NOT NULL,
        created_at {ts} NOT NULL,
        PRIMARY KEY (id),
        CONSTRAINT uq_fa_messages_agent_run_seq UNIQUE (agent_id, run, seq)
    )""",
]

# Timestamps as each backend held them: SQLite naive UTC text, PostgreSQL timestamptz.
_V1_TIME = {"sqlite": "'{t:%Y-%m-%d %H:%M:%S.%f}'", "postgres": "'{t:%Y-%m-%d %H:%M:%S.%f}+00'"}


def _v1_rows(name: str) -> list[str]:
    def ts(minutes: int) -> str:
        return _V1_TIME[name].format(t=(T0 + timedelta(minutes=minutes)).replace(tzinfo=None))

    trigger = Trigger(seq=1, kind=TriggerKind.HUMAN_MESSAGE, received_at=T0, text="hi")
    triggers = "[" + trigger.model_dump_json() + "]"
    run_columns = (
        "agent_id, run, session, status, triggers_json, trigger_block, started_at, ended_at, "
        "verdict_action, verdict_state_changed, verdict_error, noop, in_prompt, error, "
        "final_text, actions_digest, mutating_calls, tool_calls, rounds, input_tokens, "
        "output_tokens, cache_read_input_tokens, cache_creation_input_tokens, llm_seconds, "
        "history_runs_included, history_runs_dropped, estimated_prompt_tokens"
    )
    return [
        f"INSERT INTO fa_sessions (agent_id, session, started_at, reason) "
        f"VALUES ('a', 1, {ts(0)}, 'agent started')",
        f"INSERT INTO fa_runs ({run_columns}) VALUES ('a', 1, 1, 'ok', '{triggers}', "
        f"'block 1', {ts(1)}, {ts(2)}, true, false, '', false, true, '', 'final 1', "
        "'digest 1', 1, 2, 3, 10, 20, 30, 40, 1.5, 0, 0, 999)",
        f"INSERT INTO fa_runs ({run_columns}) VALUES ('a', 2, 1, 'running', '[]', "
        f"'block 2', {ts(3)}, NULL, NULL, NULL, '', false, true, '', '', '', "
        "0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)",
        "INSERT INTO fa_messages (agent_id, run, seq, round, role, kind, content, in_prompt, "
        f"created_at) VALUES ('a', 1, 1, 1, 'assistant', 'assistant', 'reply', true, {ts(1)})",
    ]


def _build_v1(backend: Backend, *, rows: bool = True) -> None:
    ddl = [stmt.format(**_V1_TYPES[backend.name]) for stmt in _V1_DDL]
    backend.execute_script(ddl + (_v1_rows(backend.name) if rows else []))


def _schema(store: Store) -> dict[str, Any]:
    """Columns, unique constraints and indexes of every table, comparable across builds."""
    insp = inspect(store.engine)
    shape: dict[str, Any] = {}
    for table in sorted(insp.get_table_names()):
        shape[table] = {
            "columns": sorted(
                (c["name"], str(c["type"]), c["nullable"], str(c["default"]))
                for c in insp.get_columns(table)
            ),
            "unique": sorted(
                (u["name"], tuple(u["column_names"])) for u in insp.get_unique_constraints(table)
            ),
            "indexes": sorted(
                (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                for i in insp.get_indexes(table)
                # PostgreSQL lists the index behind each unique constraint as well.
                if not i.get("duplicates_constraint")
            ),
            "pk": tuple(insp.get_pk_constraint(table)["constrained_columns"]),
        }
    return shape


def _finish(
    store: Store, run: int, workflow_run_id: str = "", usage: TokenUsage | None = None
) -> None:
    store.finish_run(
        "a",
        run,
        status=RunStatus.OK,
        verdict=None,
        verdict_error="",
        noop=False,
        in_prompt=True,
        error="",
        final_text=f"final {run}",
        actions_digest="",
        mutating_calls=0,
        tool_calls=0,
        rounds=1,
        usage=usage or TokenUsage(),
        llm_seconds=0.1,
        ended_at=T0 + timedelta(hours=1),
        workflow_run_id=workflow_run_id,
    )


# ---------------------------------------------------------------- tests


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

    first = store.get_run("a", 1)
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
    assert [m.content for m in store.run_messages("a", 1)] == ["reply"]
    assert [s.reason for s in store.list_sessions("a")] == ["agent started"]
    assert store.latest_counters("a") == (2, 1)

    # The old row of run 2 was written without a workflow run ID: it is the
    # attempt that run's own (upgraded) workflow closes.
    _finish(store, 2, workflow_run_id="wf-after-upgrade")
    second = store.get_run("a", 2)
    assert second is not None and (second.attempt, second.status) == (1, RunStatus.OK)

    # The unique key is (agent, run, attempt) now: a replay opens attempt 2.
    assert store.begin_run("a", 1, 1, [], "replay", T0 + timedelta(days=1), "wf-replay") == 2
    assert [r.attempt for r in store.run_attempts("a", 1)] == [1, 2]
    # New rows get fresh ids after the copied ones (SQLite rebuilt the table).
    store.ensure_session("a", 2, "reset", T0)
    store.begin_run("a", 3, 2, [], "b", T0, "wf-3")
    assert store.get_run("a", 3) is not None


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


def test_a_version_2_store_gains_the_1h_cache_column(
    backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # A version 2 store: today's, less the column version 3 adds.
    store = backend.store()
    store.create_all()
    with store.engine.begin() as conn:
        conn.execute(text("ALTER TABLE fa_runs DROP COLUMN cache_creation_1h_input_tokens"))
        conn.execute(text("UPDATE fa_meta SET value = '2'"))
    store.dispose()
    store = backend.store()
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO fa_runs (agent_id, run, attempt, workflow_run_id, session, status, "
                "triggers_json, trigger_block, started_at, verdict_error, noop, in_prompt, error, "
                "final_text, actions_digest, mutating_calls, tool_calls, rounds, stop_reasons, "
                "input_tokens, output_tokens, cache_read_input_tokens, "
                "cache_creation_input_tokens, llm_seconds, history_runs_included, "
                "history_runs_dropped, estimated_prompt_tokens) VALUES ('a', 1, 1, '', 1, 'ok', "
                "'[]', 'b', :t, '', false, true, '', 'f', '', 0, 0, 1, 'end_turn', 10, 20, 30, "
                "40, 0.5, 0, 0, 0)"
            ),
            {"t": T0},
        )
    assert store.condition().version == 2

    assert store.create_all() == 2
    assert store.condition().version == SCHEMA_VERSION
    run = store.get_run("a", 1)
    assert run is not None
    assert run.usage == TokenUsage(
        input_tokens=10,
        output_tokens=20,
        cache_read_input_tokens=30,
        cache_creation_input_tokens=40,
    )
    _finish(store, 1)
    store.begin_run("a", 2, 1, [], "b", T0)
    store.finish_run(
        "a",
        2,
        status=RunStatus.OK,
        verdict=None,
        verdict_error="",
        noop=False,
        in_prompt=True,
        error="",
        final_text="",
        actions_digest="",
        mutating_calls=0,
        tool_calls=0,
        rounds=1,
        usage=TokenUsage(cache_creation_input_tokens=9, cache_creation_1h_input_tokens=7),
        llm_seconds=0.1,
        ended_at=T0 + timedelta(hours=1),
    )
    second = store.get_run("a", 2)
    assert second is not None and second.usage.cache_creation_1h_input_tokens == 7


def test_a_version_3_store_gains_the_started_at_index(backend: Backend) -> None:
    # A version 3 store: today's, less the index version 4 adds.
    store = backend.store()
    store.create_all()
    with store.engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_fa_runs_agent_started"))
        conn.execute(text("UPDATE fa_meta SET value = '3'"))
    store.begin_run("a", 1, 1, [], "b", T0)
    _finish(store, 1)
    store.dispose()
    store = backend.store()
    assert store.condition().version == 3

    assert store.create_all() == 3
    assert store.condition().version == SCHEMA_VERSION
    indexes = {i["name"] for i in inspect(store.engine).get_indexes("fa_runs")}
    assert "ix_fa_runs_agent_started" in indexes
    assert store.llm_totals("a").runs == 1  # the record is still there


def test_a_version_4_store_gains_the_journal_index(backend: Backend) -> None:
    # A version 4 store: today's, less the index version 5 adds, with a
    # temporary create in its journal.
    store = backend.store()
    store.create_all()
    with store.engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_fa_tool_calls_agent_name_run"))
        conn.execute(text("UPDATE fa_meta SET value = '4'"))
        conn.execute(
            text(
                "INSERT INTO fa_tool_calls (agent_id, tool_use_id, run, round, name, "
                "input_json, status, result_json, started_at) VALUES ('a', 'toolu_1', 3, 1, "
                "'create_instance', :input, 'done', '', :t)"
            ),
            {"input": json.dumps({"offer_id": 7, "temporary": True}, sort_keys=True), "t": T0},
        )
    store.dispose()
    store = backend.store()
    assert store.condition().version == 4

    assert store.create_all() == 4
    assert store.condition().version == SCHEMA_VERSION
    indexes = {i["name"] for i in inspect(store.engine).get_indexes("fa_tool_calls")}
    assert "ix_fa_tool_calls_agent_name_run" in indexes
    found = ToolJournal(store).temporary_creates("a", [3])
    assert found == [(3, "toolu_1", {"offer_id": 7, "temporary": True})]


def test_a_version_5_store_gains_the_thinking_tokens_of_its_runs(backend: Backend) -> None:
    # A version 5 store: today's, less the column version 6 adds, with a run.
    store = backend.store()
    store.create_all()
    store.begin_run("a", 1, 1, [], "b", T0)
    _finish(store, 1)
    with store.engine.begin() as conn:
        conn.execute(text("ALTER TABLE fa_runs DROP COLUMN thinking_tokens"))
        conn.execute(text("UPDATE fa_meta SET value = '5'"))
    store.dispose()
    store = backend.store()
    assert store.condition().version == 5

    assert store.create_all() == 5
    assert store.condition().version == SCHEMA_VERSION
    old = store.get_run("a", 1)
    assert old is not None and old.usage.thinking_tokens == 0
    store.begin_run("a", 2, 1, [], "b", T0)
    _finish(store, 2, usage=TokenUsage(output_tokens=900, thinking_tokens=700))
    new = store.get_run("a", 2)
    assert new is not None and new.usage.thinking_tokens == 700
    assert store.llm_totals("a").usage.thinking_tokens == 700


def test_a_version_6_store_gains_the_price_of_creates_in_flight(backend: Backend) -> None:
    # A version 6 store: today's, less the column version 7 adds, with a
    # create in flight in its journal.
    store = backend.store()
    store.create_all()
    with store.engine.begin() as conn:
        conn.execute(text("ALTER TABLE fa_tool_calls DROP COLUMN reserved_dph"))
        conn.execute(text("UPDATE fa_meta SET value = '6'"))
        conn.execute(
            text(
                "INSERT INTO fa_tool_calls (agent_id, tool_use_id, run, round, name, "
                "input_json, status, result_json, started_at) VALUES ('a', 'toolu_1', 3, 1, "
                "'create_instance', '{}', 'started', '', :t)"
            ),
            {"t": T0},
        )
    store.dispose()
    store = backend.store()
    assert store.condition().version == 6

    assert store.create_all() == 6
    assert store.condition().version == SCHEMA_VERSION
    (old,) = ToolJournal(store).creates_in_flight("a", T0)
    assert (old.tool_use_id, old.run, old.reserved_dph) == ("toolu_1", 3, None)


def test_a_newer_store_is_refused_untouched(backend: Backend) -> None:
    store = backend.store()
    store.create_all()
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE fa_meta SET value = :v"), {"v": str(SCHEMA_VERSION + 1)})
    store.begin_run("a", 1, 1, [], "b", T0)

    with pytest.raises(SchemaError, match=f"schema version {SCHEMA_VERSION + 1}, newer"):
        store.create_all()
    assert store.condition().version == SCHEMA_VERSION + 1
    assert store.count_runs("a") == 1


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
    assert [r.attempt for r in stores[0].run_attempts("a", 1)] == [1]
