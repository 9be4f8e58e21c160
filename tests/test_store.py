"""Tests of `fleet_agent.store` against SQLite and PostgreSQL.

Every store test runs on both backends. PostgreSQL tests each get a fresh
schema; when the server is unreachable they fail, unless FLEET_SKIP_POSTGRES=1.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TypeVar

import pytest

from fleet_agent.models import ContextInfo, RunStatus, TokenUsage, Trigger, TriggerKind, Verdict
from fleet_agent.store import (
    HistoryEntry,
    Store,
    create_engine_for,
    default_database_url,
    redacted_url,
)
from tests.store_backends import in_threads, sqlite_store_at, store_on_both_backends  # noqa: F401  (a fixture)

AGENT = "agent-a"
OTHER = "agent-b"
T0 = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)

_T = TypeVar("_T")


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = sqlite_store_at(tmp_path)
    yield store
    store.dispose()


# ---------------------------------------------------------------- helpers


def _trigger(seq: int, text_: str = "scale up") -> Trigger:
    return Trigger(seq=seq, kind=TriggerKind.HUMAN_MESSAGE, received_at=T0, text=text_, author="op")


def _begin(store: Store, run: int, session: int = 1, agent: str = AGENT) -> None:
    store.begin_run(
        agent,
        run,
        session,
        [_trigger(run)],
        f"block {run}",
        T0 + timedelta(minutes=run),
    )


def _finish(
    store: Store,
    run: int,
    *,
    status: RunStatus = RunStatus.OK,
    in_prompt: bool = True,
    agent: str = AGENT,
    verdict: Verdict | None = None,
) -> None:
    store.finish_run(
        agent,
        run,
        status=status,
        verdict=verdict,
        verdict_error="",
        noop=False,
        in_prompt=in_prompt,
        error="",
        final_text=f"final {run}",
        actions_digest=f"digest {run}",
        mutating_calls=0,
        tool_calls=0,
        rounds=1,
        usage=TokenUsage(),
        llm_seconds=0.5,
        ended_at=T0 + timedelta(minutes=run, seconds=30),
    )


def _message(
    store: Store, run: int, seq: int, role: str = "assistant", in_prompt: bool = False
) -> bool:
    return store.add_message(
        AGENT,
        run,
        seq,
        round=seq // 2,
        role=role,  # type: ignore[arg-type]  # tests pass plain strings on purpose
        kind="assistant" if role == "assistant" else "context",
        content=f'[{{"type": "text", "text": "msg {seq}"}}]',
        created_at=T0,
        in_prompt=in_prompt,
    )


# ---------------------------------------------------------------- idempotence


def test_create_all_twice_is_harmless(store: Store) -> None:
    _begin(store, 1)
    store.create_all()
    assert store.count_runs(AGENT) == 1


def test_begin_run_twice_keeps_the_first_row(store: Store) -> None:
    store.begin_run(AGENT, 1, 1, [_trigger(1, "first")], "first block", T0)
    store.begin_run(AGENT, 1, 1, [_trigger(1, "retry")], "retry block", T0 + timedelta(hours=1))

    assert store.count_runs(AGENT) == 1
    record = store.get_run(AGENT, 1)
    assert record is not None
    assert record.status is RunStatus.RUNNING
    assert record.trigger_block == "first block"
    assert record.triggers == [_trigger(1, "first")]
    assert record.started_at == T0
    assert record.ended_at is None
    assert record.verdict is None


def test_add_message_twice_inserts_once(store: Store) -> None:
    assert store.add_message(AGENT, 1, 0, 0, "user", "context", "first", T0) is True
    assert store.add_message(AGENT, 1, 0, 0, "user", "context", "retry", T0) is False

    messages = store.run_messages(AGENT, 1)
    assert [(m.seq, m.content) for m in messages] == [(0, "first")]
    # Same seq in another run or for another agent is a different message.
    assert store.add_message(AGENT, 2, 0, 0, "user", "context", "run 2", T0) is True
    assert store.add_message(OTHER, 1, 0, 0, "user", "context", "other", T0) is True


def test_add_message_rejects_unknown_role(store: Store) -> None:
    with pytest.raises(ValueError, match="role"):
        _message(store, 1, 0, role="system")
    assert store.run_messages(AGENT, 1) == []


def test_finish_run_retry_gives_the_same_record(store: Store) -> None:
    _begin(store, 1)
    _finish(store, 1, verdict=Verdict(action=True, state_changed=False))
    first = store.get_run(AGENT, 1)
    _finish(store, 1, verdict=Verdict(action=True, state_changed=False))
    assert store.get_run(AGENT, 1) == first


# ---------------------------------------------------------------- counters


def test_latest_counters(store: Store) -> None:
    assert store.latest_counters(AGENT) == (0, 0)

    store.ensure_session(AGENT, 3, "agent started", T0)
    store.ensure_session(AGENT, 3, "retried", T0)
    assert store.latest_counters(AGENT) == (0, 3)

    _begin(store, 7, session=2)
    assert store.latest_counters(AGENT) == (7, 3)

    _begin(store, 9, session=5)  # a run in a session with no session row
    _begin(store, 8, session=5)
    assert store.latest_counters(AGENT) == (9, 5)

    assert store.latest_counters(OTHER) == (0, 0)


def test_list_sessions_keeps_the_first_reason(store: Store) -> None:
    store.ensure_session(AGENT, 2, "reset: too long", T0)
    store.ensure_session(AGENT, 1, "agent started", T0)
    store.ensure_session(AGENT, 2, "retried write", T0)
    store.ensure_session(OTHER, 1, "other agent", T0)
    assert [(s.session, s.reason) for s in store.list_sessions(AGENT)] == [
        (1, "agent started"),
        (2, "reset: too long"),
    ]
    assert store.list_sessions(AGENT)[0].started_at == T0


# ---------------------------------------------------------------- runs


def test_run_round_trip(store: Store) -> None:
    triggers = [_trigger(1, "hello"), _trigger(2, "again")]
    store.begin_run(AGENT, 4, 2, triggers, "the block", T0)
    store.set_run_context(
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
    store.finish_run(
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

    record = store.get_run(AGENT, 4)
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
        store.set_run_context(AGENT, 1, ContextInfo())
    _begin(store, 1, agent=OTHER)  # same run number, other agent: still missing
    with pytest.raises(KeyError):
        _finish(store, 1)
    assert store.get_run(AGENT, 1) is None


def test_get_missing_returns_none(store: Store) -> None:
    assert store.get_run(AGENT, 1) is None
    assert store.get_message(AGENT, 1, 0) is None


def test_list_runs(store: Store) -> None:
    for run in range(1, 7):
        _begin(store, run, session=1 if run <= 3 else 2)
    _begin(store, 1, agent=OTHER)

    assert [r.run for r in store.list_runs(AGENT)] == [6, 5, 4, 3, 2, 1]
    assert [r.run for r in store.list_runs(AGENT, limit=2)] == [6, 5]
    assert [r.run for r in store.list_runs(AGENT, before_run=5, limit=2)] == [4, 3]
    assert [r.run for r in store.list_runs(AGENT, session=1)] == [3, 2, 1]
    assert [r.run for r in store.list_runs(AGENT, session=2, before_run=6)] == [5, 4]
    assert store.count_runs(AGENT) == 6
    assert store.count_runs(OTHER) == 1


def test_delete_agent_removes_only_that_agent(store: Store) -> None:
    for agent in (AGENT, OTHER):
        store.ensure_session(agent, 1, "start", T0)
        _begin(store, 1, agent=agent)
        store.add_message(agent, 1, 0, 0, "user", "context", "x", T0)

    store.delete_agent(AGENT)

    assert store.count_runs(AGENT) == 0
    assert store.run_messages(AGENT, 1) == []
    assert store.latest_counters(AGENT) == (0, 0)
    assert store.count_runs(OTHER) == 1
    assert len(store.run_messages(OTHER, 1)) == 1
    assert store.latest_counters(OTHER) == (1, 1)


# ---------------------------------------------------------------- messages


def test_messages_are_ordered_by_seq(store: Store) -> None:
    for seq in (3, 0, 2, 1):
        _message(store, 1, seq, role="user" if seq % 2 == 0 else "assistant")
    messages = store.run_messages(AGENT, 1)
    assert [m.seq for m in messages] == [0, 1, 2, 3]
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    message = store.get_message(AGENT, 1, 2)
    assert message is not None
    assert (message.round, message.kind) == (1, "context")
    assert message.content == '[{"type": "text", "text": "msg 2"}]'


@pytest.mark.parametrize("run_in_prompt", [True, False])
def test_finish_run_keeps_only_the_last_assistant_message_in_prompt(
    store: Store, run_in_prompt: bool
) -> None:
    _begin(store, 1)
    _message(store, 1, 0, role="user", in_prompt=True)
    _message(store, 1, 1, role="assistant", in_prompt=True)
    _message(store, 1, 2, role="user", in_prompt=True)
    _message(store, 1, 3, role="assistant", in_prompt=False)
    _message(store, 1, 4, role="user", in_prompt=True)  # after the last assistant message
    # Another run's messages are untouched.
    _begin(store, 2)
    _message(store, 2, 0, role="assistant", in_prompt=True)

    _finish(store, 1, in_prompt=run_in_prompt)

    flags = {m.seq: m.in_prompt for m in store.run_messages(AGENT, 1)}
    assert flags == {0: False, 1: False, 2: False, 3: run_in_prompt, 4: False}
    other = store.get_message(AGENT, 2, 0)
    assert other is not None and other.in_prompt is True


def test_finish_run_without_assistant_messages_clears_all(store: Store) -> None:
    _begin(store, 1)
    _message(store, 1, 0, role="user", in_prompt=True)
    _finish(store, 1, in_prompt=True)
    assert [m.in_prompt for m in store.run_messages(AGENT, 1)] == [False]


# ---------------------------------------------------------------- prompt history


def test_prompt_history_filters_and_orders(store: Store) -> None:
    _begin(store, 1, session=1)  # other session
    _finish(store, 1)
    # Inserted out of order to prove the ordering comes from the query.
    for run in (5, 2, 3, 4, 6, 7):
        _begin(store, run, session=2)
    _finish(store, 5, status=RunStatus.FAILED)
    _finish(store, 2)
    _finish(store, 3, in_prompt=False)  # excluded from prompts
    # run 4 stays 'running' (its row has in_prompt=True: only the status excludes it)
    _finish(store, 6)
    _finish(store, 7)  # not before run 7
    _begin(store, 2, session=2, agent=OTHER)
    _finish(store, 2, agent=OTHER)

    running = store.get_run(AGENT, 4)
    assert running is not None and running.in_prompt and running.status is RunStatus.RUNNING

    history = store.prompt_history(AGENT, 2, before_run=7)
    assert [h.run for h in history] == [2, 5, 6]
    assert history[0] == HistoryEntry(
        run=2,
        started_at=T0 + timedelta(minutes=2),
        ended_at=T0 + timedelta(minutes=2, seconds=30),
        status=RunStatus.OK,
        trigger_block="block 2",
        final_text="final 2",
        actions_digest="digest 2",
        noop=False,
    )
    assert history[1].status is RunStatus.FAILED
    assert [h.run for h in store.prompt_history(AGENT, 2, before_run=6)] == [2, 5]
    assert store.prompt_history(AGENT, 3, before_run=100) == []


# ---------------------------------------------------------------- timestamps


def test_timestamps_round_trip_as_aware_utc(store: Store) -> None:
    plus_two = timezone(timedelta(hours=2))
    started = datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=plus_two)
    ended = datetime(2025, 6, 1, 7, 30, 0, 1, tzinfo=timezone(timedelta(hours=-5)))
    store.begin_run(AGENT, 1, 1, [_trigger(1)], "b", started)
    store.add_message(AGENT, 1, 0, 0, "user", "context", "x", started)
    _finish(store, 1)
    store.finish_run(
        AGENT,
        1,
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
        rounds=0,
        usage=TokenUsage(),
        llm_seconds=0.0,
        ended_at=ended,
    )

    record = store.get_run(AGENT, 1)
    message = store.get_message(AGENT, 1, 0)
    assert record is not None and message is not None
    for value, expected in (
        (record.started_at, started),
        (record.ended_at, ended),
        (message.created_at, started),
        (record.triggers[0].received_at, T0),
    ):
        assert value is not None
        assert value.tzinfo is not None and value.utcoffset() == timedelta(0)
        assert value == expected
    assert record.started_at == datetime(2025, 6, 1, 10, 0, 0, 123456, tzinfo=UTC)
    assert record.started_at.tzinfo is UTC
    history = store.prompt_history(AGENT, 1, before_run=2)
    assert history[0].ended_at == datetime(2025, 6, 1, 12, 30, 0, 1, tzinfo=UTC)


def test_naive_timestamps_are_rejected(store: Store) -> None:
    naive = datetime(2025, 1, 1, 12, 0)
    with pytest.raises(ValueError, match="timezone-aware"):
        store.begin_run(AGENT, 1, 1, [], "b", naive)
    with pytest.raises(ValueError, match="timezone-aware"):
        store.add_message(AGENT, 1, 0, 0, "user", "context", "x", naive)
    with pytest.raises(ValueError, match="timezone-aware"):
        store.ensure_session(AGENT, 1, "start", naive)
    assert store.count_runs(AGENT) == 0


# ---------------------------------------------------------------- concurrency


def test_concurrent_add_message(store: Store) -> None:
    threads, per_thread = 8, 10
    shared = range(1000, 1000 + per_thread)  # every thread writes these same seqs

    def work(i: int) -> tuple[list[bool], list[bool]]:
        own = [_message(store, 1, i * 100 + k) for k in range(per_thread)]
        dup = [_message(store, 1, seq) for seq in shared]
        return own, dup

    results = in_threads(threads, work)

    assert all(all(own) for own, _ in results), "every distinct seq must insert"
    # Each shared seq was inserted by exactly one thread.
    for k in range(per_thread):
        assert sum(dup[k] for _, dup in results) == 1
    expected = sorted([i * 100 + k for i in range(threads) for k in range(per_thread)])
    expected += list(shared)
    assert [m.seq for m in store.run_messages(AGENT, 1)] == expected


def test_concurrent_begin_and_finish_run(store: Store) -> None:
    in_threads(8, lambda i: _begin(store, 1 + i % 2))
    assert store.count_runs(AGENT) == 2
    in_threads(8, lambda i: _finish(store, 1 + i % 2))
    assert [r.status for r in store.list_runs(AGENT)] == [RunStatus.OK, RunStatus.OK]


# ---------------------------------------------------------------- engine


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
