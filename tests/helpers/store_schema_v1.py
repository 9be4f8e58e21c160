"""A store as it was at schema version 1, for the schema tests.

The old schema below is fixture data: the DDL that the store created before
versioning (schema version 1), copied here so the tests keep building exactly
that database whatever the code does later. With it: rows of that age, the
schema a database has, and a run finished the short way.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import inspect

from fleet_agent.models import RunStatus, TokenUsage, Trigger, TriggerKind
from fleet_agent.store import Store
from tests.helpers.store_backends import Backend

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
    store.run_writes.finish_run(
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
