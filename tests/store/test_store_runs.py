"""Run records in `fleet_agent.store`: the latest counters, sessions, a run's
round trip, listing, missing runs, and deleting one agent's.

Every test runs on SQLite and PostgreSQL (tests/helpers/store_backends.py): each
PostgreSQL test gets a fresh schema; when the server is unreachable they fail,
unless FLEET_SKIP_POSTGRES=1.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleet_agent.models import ContextInfo, RunStatus, TokenUsage, Verdict
from fleet_agent.store import Store
from tests.helpers.store import AGENT, OTHER, T0, _begin, _finish, _trigger
from tests.helpers.store_backends import store_on_both_backends

__all__ = ["store_on_both_backends"]  # the fixture, imported for pytest


def test_latest_counters(store: Store) -> None:
    assert store.run_reads.latest_counters(AGENT) == (0, 0)

    store.sessions.ensure_session(AGENT, 3, "agent started", T0)
    store.sessions.ensure_session(AGENT, 3, "retried", T0)
    assert store.run_reads.latest_counters(AGENT) == (0, 3)

    _begin(store, 7, session=2)
    assert store.run_reads.latest_counters(AGENT) == (7, 3)

    _begin(store, 9, session=5)  # a run in a session with no session row
    _begin(store, 8, session=5)
    assert store.run_reads.latest_counters(AGENT) == (9, 5)

    assert store.run_reads.latest_counters(OTHER) == (0, 0)


def test_list_sessions_keeps_the_first_reason(store: Store) -> None:
    store.sessions.ensure_session(AGENT, 2, "reset: too long", T0)
    store.sessions.ensure_session(AGENT, 1, "agent started", T0)
    store.sessions.ensure_session(AGENT, 2, "retried write", T0)
    store.sessions.ensure_session(OTHER, 1, "other agent", T0)
    assert [(s.session, s.reason) for s in store.sessions.list_sessions(AGENT)] == [
        (1, "agent started"),
        (2, "reset: too long"),
    ]
    assert store.sessions.list_sessions(AGENT)[0].started_at == T0


def test_run_round_trip(store: Store) -> None:
    triggers = [_trigger(1, "hello"), _trigger(2, "again")]
    store.run_writes.begin_run(AGENT, 4, 2, triggers, "the block", T0)
    store.run_writes.set_run_context(
        AGENT,
        4,
        ContextInfo(history_runs_included=3, history_runs_dropped=1, estimated_prompt_tokens=999),
    )
    usage = TokenUsage(
        input_tokens=10,
        output_tokens=20,
        cache_read_input_tokens=30,
        cache_creation_input_tokens=40,
        cache_creation_1h_input_tokens=25,
    )
    store.run_writes.finish_run(
        AGENT,
        4,
        status=RunStatus.MAX_ROUNDS,
        verdict=Verdict(action=False, state_changed=True),
        verdict_error="late verdict",
        noop=True,
        in_prompt=False,
        error="ran out of rounds",
        final_text="done",
        actions_digest="create_instance 1\ndestroy_instance 2",
        mutating_calls=2,
        tool_calls=5,
        rounds=12,
        usage=usage,
        llm_seconds=3.25,
        ended_at=T0 + timedelta(seconds=90),
    )

    record = store.run_reads.get_run(AGENT, 4)
    assert record is not None
    assert (record.agent_id, record.run, record.session) == (AGENT, 4, 2)
    assert record.status is RunStatus.MAX_ROUNDS
    assert record.triggers == triggers
    assert record.trigger_block == "the block"
    assert record.verdict == Verdict(action=False, state_changed=True)
    assert record.verdict_error == "late verdict"
    assert (record.noop, record.in_prompt) == (True, False)
    assert record.error == "ran out of rounds"
    assert record.final_text == "done"
    assert record.actions_digest == "create_instance 1\ndestroy_instance 2"
    assert (record.mutating_calls, record.tool_calls, record.rounds) == (2, 5, 12)
    assert record.usage == usage
    assert record.llm_seconds == 3.25
    assert record.ended_at == T0 + timedelta(seconds=90)
    assert record.context == ContextInfo(
        history_runs_included=3, history_runs_dropped=1, estimated_prompt_tokens=999
    )


def test_updates_of_a_missing_run_raise_key_error(store: Store) -> None:
    with pytest.raises(KeyError):
        _finish(store, 1)
    with pytest.raises(KeyError):
        store.run_writes.set_run_context(AGENT, 1, ContextInfo())
    _begin(store, 1, agent=OTHER)  # same run number, other agent: still missing
    with pytest.raises(KeyError):
        _finish(store, 1)
    assert store.run_reads.get_run(AGENT, 1) is None


def test_get_missing_returns_none(store: Store) -> None:
    assert store.run_reads.get_run(AGENT, 1) is None
    assert store.messages.get_message(AGENT, 1, 0) is None


def test_list_runs(store: Store) -> None:
    for run in range(1, 7):
        _begin(store, run, session=1 if run <= 3 else 2)
    _begin(store, 1, agent=OTHER)

    assert [r.run for r in store.run_reads.list_runs(AGENT)] == [6, 5, 4, 3, 2, 1]
    assert [r.run for r in store.run_reads.list_runs(AGENT, limit=2)] == [6, 5]
    assert [r.run for r in store.run_reads.list_runs(AGENT, before_run=5, limit=2)] == [4, 3]
    assert [r.run for r in store.run_reads.list_runs(AGENT, session=1)] == [3, 2, 1]
    assert [r.run for r in store.run_reads.list_runs(AGENT, session=2, before_run=6)] == [5, 4]
    assert store.run_reads.count_runs(AGENT) == 6
    assert store.run_reads.count_runs(OTHER) == 1


def test_delete_agent_removes_only_that_agent(store: Store) -> None:
    for agent in (AGENT, OTHER):
        store.sessions.ensure_session(agent, 1, "start", T0)
        _begin(store, 1, agent=agent)
        store.messages.add_message(agent, 1, 0, 0, "user", "context", "x", T0)

    store.delete_agent(AGENT)

    assert store.run_reads.count_runs(AGENT) == 0
    assert store.messages.run_messages(AGENT, 1) == []
    assert store.run_reads.latest_counters(AGENT) == (0, 0)
    assert store.run_reads.count_runs(OTHER) == 1
    assert len(store.messages.run_messages(OTHER, 1)) == 1
    assert store.run_reads.latest_counters(OTHER) == (1, 1)
