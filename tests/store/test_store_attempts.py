"""Run attempts (a run executed again after a reset) and the inbox, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fleet_agent.models import ContextInfo, InboxItem, RunStatus, TokenUsage, Trigger, TriggerKind
from fleet_agent.store import Store
from tests.helpers.store_backends import Backend, backend, in_threads

__all__ = ["backend"]  # the fixture, imported for pytest

AGENT = "agent-a"
T0 = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
W1, W2, W3 = "wf-run-1", "wf-run-2", "wf-run-3"


@pytest.fixture
def store(backend: Backend) -> Store:
    store = backend.store()
    store.create_all()
    return store


def _begin(store: Store, run: int, workflow_run_id: str, block: str = "", session: int = 1) -> int:
    trigger = Trigger(seq=run, kind=TriggerKind.TRIGGER_NOW, received_at=T0, reason=block)
    return store.run_writes.begin_run(
        AGENT,
        run,
        session,
        [trigger],
        block or f"block {run}",
        T0 + timedelta(minutes=run),
        workflow_run_id,
    )


def _finish(
    store: Store,
    run: int,
    workflow_run_id: str,
    *,
    text: str = "",
    in_prompt: bool = True,
    status: RunStatus = RunStatus.OK,
    context: ContextInfo | None = None,
) -> None:
    store.run_writes.finish_run(
        AGENT,
        run,
        status=status,
        verdict=None,
        verdict_error="",
        noop=False,
        in_prompt=in_prompt,
        error="",
        final_text=text or f"final {run} by {workflow_run_id}",
        actions_digest="",
        mutating_calls=0,
        tool_calls=0,
        rounds=1,
        usage=TokenUsage(output_tokens=len(workflow_run_id)),
        llm_seconds=0.1,
        ended_at=T0 + timedelta(minutes=run, seconds=30),
        workflow_run_id=workflow_run_id,
        context=context,
    )


# ---------------------------------------------------------------- attempts


def test_a_replay_keeps_the_original_record(store: Store) -> None:
    assert _begin(store, 12, W1, "original") == 1
    _finish(store, 12, W1, text="rented one machine")

    # `temporal workflow reset` to before run 12: it executes again.
    assert _begin(store, 12, W2, "replay") == 2
    _finish(store, 12, W2, text="adopted the machine")

    original, replay = store.run_reads.run_attempts(AGENT, 12)
    assert (original.attempt, original.workflow_run_id) == (1, W1)
    assert (original.trigger_block, original.final_text) == ("original", "rented one machine")
    assert (replay.attempt, replay.workflow_run_id) == (2, W2)
    assert (replay.trigger_block, replay.final_text) == ("replay", "adopted the machine")
    latest = store.run_reads.get_run(AGENT, 12)
    assert latest == replay
    assert store.run_reads.get_run(AGENT, 12, attempt=1) == original
    assert store.run_reads.get_run(AGENT, 12, attempt=3) is None
    assert store.run_reads.count_runs(AGENT) == 1
    assert store.run_reads.latest_counters(AGENT) == (12, 1)


def test_retries_within_one_workflow_run_are_idempotent(store: Store) -> None:
    assert _begin(store, 1, W1, "first") == 1
    assert _begin(store, 1, W1, "retry") == 1
    assert _begin(store, 1, "", "unknown writer") == 1  # "" = the latest attempt
    assert _begin(store, 1, W2) == 2
    assert _begin(store, 1, W1, "late retry of the original") == 1
    assert _begin(store, 1, W2) == 2
    assert _begin(store, 1, "") == 2

    records = store.run_reads.run_attempts(AGENT, 1)
    assert [(r.attempt, r.workflow_run_id, r.trigger_block) for r in records] == [
        (1, W1, "first"),
        (2, W2, "block 1"),
    ]
    _finish(store, 1, W2)
    first = store.run_reads.get_run(AGENT, 1)
    _finish(store, 1, W2)
    assert store.run_reads.get_run(AGENT, 1) == first


def test_writes_target_the_attempt_of_their_workflow_run(store: Store) -> None:
    _begin(store, 5, W1)
    _begin(store, 5, W2)
    # The original's record_run arrives after the replay began (it was in flight).
    _finish(store, 5, W1, text="late original", status=RunStatus.FAILED)
    store.run_writes.set_run_context(AGENT, 5, _context(7), W1)
    original, replay = store.run_reads.run_attempts(AGENT, 5)
    assert (original.status, original.final_text, original.history_runs_included) == (
        RunStatus.FAILED,
        "late original",
        7,
    )
    assert (replay.status, replay.history_runs_included) == (RunStatus.RUNNING, 0)

    _finish(store, 5, "", text="unknown writer")  # "" = the latest attempt
    assert store.run_reads.run_attempts(AGENT, 5)[1].final_text == "unknown writer"
    assert store.run_reads.run_attempts(AGENT, 5)[0].final_text == "late original"

    # A workflow run that never opened an attempt closes nothing.
    with pytest.raises(KeyError, match=f"opened by workflow run '{W3}'"):
        _finish(store, 5, W3)
    with pytest.raises(KeyError):
        store.run_writes.set_run_context(AGENT, 5, _context(1), W3)
    assert store.run_reads.get_attempt_of(AGENT, 5, W3) is None
    attempt = store.run_reads.get_attempt_of(AGENT, 5, W1)
    assert attempt is not None and attempt.attempt == 1
    assert [r.final_text for r in store.run_reads.run_attempts(AGENT, 5)] == [
        "late original",
        "unknown writer",
    ]


def test_the_context_written_with_the_outcome_lands_on_the_same_attempt(store: Store) -> None:
    """record_run writes the prompt's bookkeeping in finish_run's transaction:
    the same columns set_run_context writes, on the attempt of its workflow
    run; with no such attempt neither is written."""
    _begin(store, 6, W1)
    _begin(store, 6, W2)
    full = ContextInfo(
        history_runs_included=4, history_runs_dropped=2, estimated_prompt_tokens=1234
    )
    _finish(store, 6, W1, text="original", context=full)
    original, replay = store.run_reads.run_attempts(AGENT, 6)
    assert (original.final_text, original.history_runs_included) == ("original", 4)
    assert original.history_runs_dropped == 2 and original.estimated_prompt_tokens == 1234
    assert replay.history_runs_included == 0
    _finish(store, 6, W2)  # no context: the columns stay as they were
    assert store.run_reads.run_attempts(AGENT, 6)[1].history_runs_included == 0
    with pytest.raises(KeyError):
        _finish(store, 6, W3, context=_context(9))
    assert [r.history_runs_included for r in store.run_reads.run_attempts(AGENT, 6)] == [4, 0]


def test_an_attempt_without_a_workflow_run_id_is_closed_by_its_named_writer(store: Store) -> None:
    # Opened by code that did not name its workflow run (e.g. before an upgrade).
    assert _begin(store, 3, "") == 1
    _finish(store, 3, W1, text="closed after the upgrade")
    record = store.run_reads.get_run(AGENT, 3)
    assert record is not None and (record.attempt, record.final_text) == (
        1,
        "closed after the upgrade",
    )
    # A named workflow run that finds only that unnamed attempt is a replay.
    assert _begin(store, 3, W2) == 2


def test_list_runs_returns_every_attempt_newest_first(store: Store) -> None:
    _begin(store, 1, W1)
    _begin(store, 2, W1)
    _begin(store, 2, W2)
    _begin(store, 2, W3)
    _begin(store, 3, W1, session=2)

    assert [(r.run, r.attempt) for r in store.run_reads.list_runs(AGENT)] == [
        (3, 1),
        (2, 3),
        (2, 2),
        (2, 1),
        (1, 1),
    ]
    assert [(r.run, r.attempt) for r in store.run_reads.list_runs(AGENT, limit=2)] == [
        (3, 1),
        (2, 3),
    ]
    assert [(r.run, r.attempt) for r in store.run_reads.list_runs(AGENT, before_run=2)] == [(1, 1)]
    assert [r.run for r in store.run_reads.list_runs(AGENT, session=2)] == [3]
    assert store.run_reads.count_runs(AGENT) == 3


def test_prompt_history_uses_the_latest_finished_attempt_of_each_run(store: Store) -> None:
    _begin(store, 1, W1)
    _finish(store, 1, W1, text="run 1 original")
    _begin(store, 1, W2)
    _finish(store, 1, W2, text="run 1 replay")
    _begin(store, 2, W1)
    _finish(store, 2, W1, text="run 2 original")
    _begin(store, 2, W2)  # replay still running: the original stands in
    _begin(store, 3, W1)
    _finish(store, 3, W1, text="run 3 original")
    _begin(store, 3, W2)
    _finish(store, 3, W2, in_prompt=False)  # the replay was a no-op: run 3 drops out
    _begin(store, 4, W1)
    _finish(store, 4, W1, in_prompt=False)
    _begin(store, 4, W2)
    _finish(store, 4, W2, text="run 4 replay")  # and this one comes in

    history = store.run_reads.prompt_history(AGENT, 1, before_run=10)
    assert [(h.run, h.final_text) for h in history] == [
        (1, "run 1 replay"),
        (2, "run 2 original"),
        (4, "run 4 replay"),
    ]


def test_messages_are_shared_by_the_attempts_of_a_run(store: Store) -> None:
    _begin(store, 1, W1)
    store.messages.add_message(AGENT, 1, 0, 0, "user", "context", "context of the original", T0)
    store.messages.add_message(AGENT, 1, 1, 1, "assistant", "assistant", "the stored reply", T0)
    _begin(store, 1, W2)
    # The replay's writes of the same messages keep the stored ones.
    assert not store.messages.add_message(AGENT, 1, 1, 1, "assistant", "assistant", "new", T0)
    _finish(store, 1, W2)
    assert [(m.content, m.in_prompt) for m in store.messages.run_messages(AGENT, 1)] == [
        ("context of the original", False),
        ("the stored reply", True),
    ]


def test_concurrent_replays_get_distinct_attempts(store: Store) -> None:
    _begin(store, 1, W1)
    ids = [f"wf-{i % 4}" for i in range(8)]  # 4 workflow runs, each writing twice
    attempts = in_threads(8, lambda i: _begin(store, 1, ids[i]))
    by_id: dict[str, set[int]] = {}
    for wf, attempt in zip(ids, attempts, strict=True):
        by_id.setdefault(wf, set()).add(attempt)
    assert all(len(a) == 1 for a in by_id.values()), by_id
    assert sorted(a for (a,) in by_id.values()) == [2, 3, 4, 5]
    assert [r.attempt for r in store.run_reads.run_attempts(AGENT, 1)] == [1, 2, 3, 4, 5]


def _context(included: int) -> ContextInfo:
    return ContextInfo(history_runs_included=included)


# ---------------------------------------------------------------- inbox


def _item(seq: int, text: str, key: str = "") -> InboxItem:
    return InboxItem(key=key or f"{seq}-k", seq=seq, author="alice", text=text, received_at=T0)


def test_stash_and_read_back_texts(store: Store) -> None:
    long_text = "x" * 20_000 + " end"
    assert store.inbox.stash_messages(AGENT, [_item(1, long_text), _item(2, "short")]) == 2

    found = store.inbox.inbox_texts(AGENT, ["1-k", "2-k", "3-k"])
    assert set(found) == {"1-k", "2-k"}
    assert found["1-k"] == _item(1, long_text)
    assert found["2-k"].text == "short" and found["2-k"].received_at == T0
    assert store.inbox.inbox_texts("other-agent", ["1-k"]) == {}
    assert store.inbox.inbox_texts(AGENT, []) == {}


def test_stash_is_idempotent_and_keeps_the_first_text(store: Store) -> None:
    assert store.inbox.stash_messages(AGENT, [_item(1, "first")]) == 1
    assert store.inbox.stash_messages(AGENT, [_item(1, "retry"), _item(2, "new")]) == 1
    assert store.inbox.stash_messages(AGENT, [_item(3, "a"), _item(3, "b")]) == 1  # same key twice
    assert store.inbox.inbox_texts(AGENT, ["1-k"])["1-k"].text == "first"
    assert store.inbox.inbox_texts(AGENT, ["3-k"])["3-k"].text == "a"
    assert store.inbox.stash_messages(AGENT, []) == 0


def test_hundreds_of_long_messages(store: Store) -> None:
    items = [_item(i, f"{i}:" + "y" * 20_000) for i in range(1, 501)]
    assert store.inbox.stash_messages(AGENT, items) == 500
    keys = [item.key for item in items]
    found = store.inbox.inbox_texts(AGENT, keys)
    assert len(found) == 500
    assert all(found[item.key].text == item.text for item in items)


def test_inbox_rejects_naive_times_and_delete_agent_clears_it(store: Store) -> None:
    with pytest.raises(ValueError, match="a time needs a UTC offset"):
        InboxItem(key="1-k", seq=1, author="a", text="t", received_at=datetime(2025, 1, 1))
    # The store refuses one all the same (a model built without validation).
    naive = InboxItem.model_construct(
        key="1-k", seq=1, author="a", text="t", received_at=datetime(2025, 1, 1)
    )
    with pytest.raises(ValueError, match="timezone-aware"):
        store.inbox.stash_messages(AGENT, [naive])
    assert store.inbox.inbox_texts(AGENT, ["1-k"]) == {}

    store.inbox.stash_messages(AGENT, [_item(1, "mine")])
    store.inbox.stash_messages("other", [_item(1, "theirs")])
    store.delete_agent(AGENT)
    assert store.inbox.inbox_texts(AGENT, ["1-k"]) == {}
    assert store.inbox.inbox_texts("other", ["1-k"])["1-k"].text == "theirs"


def test_inbox_item_needs_a_key() -> None:
    with pytest.raises(ValueError, match="at least 1 character"):
        InboxItem(key="", seq=1, author="a", text="t", received_at=T0)
