"""Timestamps in `fleet_agent.store` round-trip as aware UTC; naive ones are
refused.

Every test runs on SQLite and PostgreSQL (tests/helpers/store_backends.py): each
PostgreSQL test gets a fresh schema; when the server is unreachable they fail,
unless FLEET_SKIP_POSTGRES=1.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from fleet_agent.models import RunStatus, TokenUsage
from fleet_agent.store import Store
from tests.helpers.store import AGENT, T0, _finish, _trigger
from tests.helpers.store_backends import store_on_both_backends

__all__ = ["store_on_both_backends"]  # the fixture, imported for pytest


def test_timestamps_round_trip_as_aware_utc(store: Store) -> None:
    plus_two = timezone(timedelta(hours=2))
    started = datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=plus_two)
    ended = datetime(2025, 6, 1, 7, 30, 0, 1, tzinfo=timezone(timedelta(hours=-5)))
    store.run_writes.begin_run(AGENT, 1, 1, [_trigger(1)], "b", started)
    store.messages.add_message(AGENT, 1, 0, 0, "user", "context", "x", started)
    _finish(store, 1)
    store.run_writes.finish_run(
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

    record = store.run_reads.get_run(AGENT, 1)
    message = store.messages.get_message(AGENT, 1, 0)
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
    history = store.run_reads.prompt_history(AGENT, 1, before_run=2)
    assert history[0].ended_at == datetime(2025, 6, 1, 12, 30, 0, 1, tzinfo=UTC)


def test_naive_timestamps_are_rejected(store: Store) -> None:
    naive = datetime(2025, 1, 1, 12, 0)
    with pytest.raises(ValueError, match="timezone-aware"):
        store.run_writes.begin_run(AGENT, 1, 1, [], "b", naive)
    with pytest.raises(ValueError, match="timezone-aware"):
        store.messages.add_message(AGENT, 1, 0, 0, "user", "context", "x", naive)
    with pytest.raises(ValueError, match="timezone-aware"):
        store.sessions.ensure_session(AGENT, 1, "start", naive)
    assert store.run_reads.count_runs(AGENT) == 0
