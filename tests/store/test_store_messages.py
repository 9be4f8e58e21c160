"""A run's messages in `fleet_agent.store`: ordered by seq, which stay in the
prompt when a run finishes, and the prompt history's filter and order.

Every test runs on SQLite and PostgreSQL (tests/helpers/store_backends.py): each
PostgreSQL test gets a fresh schema; when the server is unreachable they fail,
unless FLEET_SKIP_POSTGRES=1.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from fleet_agent.models import RunStatus
from fleet_agent.store import HistoryEntry, Store
from tests.helpers.store import AGENT, OTHER, T0, _begin, _finish, _message
from tests.helpers.store_backends import store_on_both_backends

__all__ = ["store_on_both_backends"]  # the fixture, imported for pytest


def test_messages_are_ordered_by_seq(store: Store) -> None:
    for seq in (3, 0, 2, 1):
        _message(store, 1, seq, role="user" if seq % 2 == 0 else "assistant")
    messages = store.messages.run_messages(AGENT, 1)
    assert [m.seq for m in messages] == [0, 1, 2, 3]
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    message = store.messages.get_message(AGENT, 1, 2)
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

    flags = {m.seq: m.in_prompt for m in store.messages.run_messages(AGENT, 1)}
    assert flags == {0: False, 1: False, 2: False, 3: run_in_prompt, 4: False}
    other = store.messages.get_message(AGENT, 2, 0)
    assert other is not None and other.in_prompt is True


def test_finish_run_without_assistant_messages_clears_all(store: Store) -> None:
    _begin(store, 1)
    _message(store, 1, 0, role="user", in_prompt=True)
    _finish(store, 1, in_prompt=True)
    assert [m.in_prompt for m in store.messages.run_messages(AGENT, 1)] == [False]


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

    running = store.run_reads.get_run(AGENT, 4)
    assert running is not None and running.in_prompt and running.status is RunStatus.RUNNING

    history = store.run_reads.prompt_history(AGENT, 2, before_run=7)
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
    assert [h.run for h in store.run_reads.prompt_history(AGENT, 2, before_run=6)] == [2, 5]
    assert store.run_reads.prompt_history(AGENT, 3, before_run=100) == []
