"""`fleet_agent.store` writes are idempotent: a table created, a run begun, a
message added or a run finished twice, or by threads at once, leaves one record.

Every test runs on SQLite and PostgreSQL (tests/helpers/store_backends.py): each
PostgreSQL test gets a fresh schema; when the server is unreachable they fail,
unless FLEET_SKIP_POSTGRES=1.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleet_agent.models import RunStatus, Verdict
from fleet_agent.store import Store
from tests.helpers.store import AGENT, OTHER, T0, _begin, _finish, _message, _trigger
from tests.helpers.store_backends import in_threads, store_on_both_backends

__all__ = ["store_on_both_backends"]  # the fixture, imported for pytest


def test_create_all_twice_is_harmless(store: Store) -> None:
    _begin(store, 1)
    store.create_all()
    assert store.run_reads.count_runs(AGENT) == 1


def test_begin_run_twice_keeps_the_first_row(store: Store) -> None:
    store.run_writes.begin_run(AGENT, 1, 1, [_trigger(1, "first")], "first block", T0)
    store.run_writes.begin_run(
        AGENT, 1, 1, [_trigger(1, "retry")], "retry block", T0 + timedelta(hours=1)
    )

    assert store.run_reads.count_runs(AGENT) == 1
    record = store.run_reads.get_run(AGENT, 1)
    assert record is not None
    assert record.status is RunStatus.RUNNING
    assert record.trigger_block == "first block"
    assert record.triggers == [_trigger(1, "first")]
    assert record.started_at == T0
    assert record.ended_at is None
    assert record.verdict is None


def test_add_message_twice_inserts_once(store: Store) -> None:
    assert store.messages.add_message(AGENT, 1, 0, 0, "user", "context", "first", T0) is True
    assert store.messages.add_message(AGENT, 1, 0, 0, "user", "context", "retry", T0) is False

    messages = store.messages.run_messages(AGENT, 1)
    assert [(m.seq, m.content) for m in messages] == [(0, "first")]
    # Same seq in another run or for another agent is a different message.
    assert store.messages.add_message(AGENT, 2, 0, 0, "user", "context", "run 2", T0) is True
    assert store.messages.add_message(OTHER, 1, 0, 0, "user", "context", "other", T0) is True


def test_add_message_rejects_unknown_role(store: Store) -> None:
    with pytest.raises(ValueError, match="role"):
        _message(store, 1, 0, role="system")
    assert store.messages.run_messages(AGENT, 1) == []


def test_finish_run_retry_gives_the_same_record(store: Store) -> None:
    _begin(store, 1)
    _finish(store, 1, verdict=Verdict(action=True, state_changed=False))
    first = store.run_reads.get_run(AGENT, 1)
    _finish(store, 1, verdict=Verdict(action=True, state_changed=False))
    assert store.run_reads.get_run(AGENT, 1) == first


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
    assert [m.seq for m in store.messages.run_messages(AGENT, 1)] == expected


def test_concurrent_begin_and_finish_run(store: Store) -> None:
    in_threads(8, lambda i: _begin(store, 1 + i % 2))
    assert store.run_reads.count_runs(AGENT) == 2
    in_threads(8, lambda i: _finish(store, 1 + i % 2))
    assert [r.status for r in store.run_reads.list_runs(AGENT)] == [RunStatus.OK, RunStatus.OK]
