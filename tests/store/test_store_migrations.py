"""Each step of the store's schema from version 2 on: the column or index it
adds, on SQLite and PostgreSQL (tests/helpers/store_backends.py), with the rows kept."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import inspect, text

from fleet_agent.models import RunStatus, TokenUsage
from fleet_agent.store import SCHEMA_VERSION, ToolJournal
from tests.helpers.store_backends import Backend, backend
from tests.helpers.store_schema_v1 import T0, _finish

__all__ = ["backend"]  # the fixture, imported for pytest


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
    run = store.run_reads.get_run("a", 1)
    assert run is not None
    assert run.usage == TokenUsage(
        input_tokens=10,
        output_tokens=20,
        cache_read_input_tokens=30,
        cache_creation_input_tokens=40,
    )
    _finish(store, 1)
    store.run_writes.begin_run("a", 2, 1, [], "b", T0)
    store.run_writes.finish_run(
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
    second = store.run_reads.get_run("a", 2)
    assert second is not None and second.usage.cache_creation_1h_input_tokens == 7


def test_a_version_3_store_gains_the_started_at_index(backend: Backend) -> None:
    # A version 3 store: today's, less the index version 4 adds.
    store = backend.store()
    store.create_all()
    with store.engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_fa_runs_agent_started"))
        conn.execute(text("UPDATE fa_meta SET value = '3'"))
    store.run_writes.begin_run("a", 1, 1, [], "b", T0)
    _finish(store, 1)
    store.dispose()
    store = backend.store()
    assert store.condition().version == 3

    assert store.create_all() == 3
    assert store.condition().version == SCHEMA_VERSION
    indexes = {i["name"] for i in inspect(store.engine).get_indexes("fa_runs")}
    assert "ix_fa_runs_agent_started" in indexes
    assert store.run_costs.llm_totals("a").runs == 1  # the record is still there


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
    store.run_writes.begin_run("a", 1, 1, [], "b", T0)
    _finish(store, 1)
    with store.engine.begin() as conn:
        conn.execute(text("ALTER TABLE fa_runs DROP COLUMN thinking_tokens"))
        conn.execute(text("UPDATE fa_meta SET value = '5'"))
    store.dispose()
    store = backend.store()
    assert store.condition().version == 5

    assert store.create_all() == 5
    assert store.condition().version == SCHEMA_VERSION
    old = store.run_reads.get_run("a", 1)
    assert old is not None and old.usage.thinking_tokens == 0
    store.run_writes.begin_run("a", 2, 1, [], "b", T0)
    _finish(store, 2, usage=TokenUsage(output_tokens=900, thinking_tokens=700))
    new = store.run_reads.get_run("a", 2)
    assert new is not None and new.usage.thinking_tokens == 700
    assert store.run_costs.llm_totals("a").usage.thinking_tokens == 700


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
