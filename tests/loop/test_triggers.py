"""The pending-trigger buffer: coalescing, byte budget, stored texts (pure, no Temporal)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_agent.loop.triggers import (
    MAX_PENDING_BYTES,
    MAX_UNSTORED_BYTES,
    PREVIEW_CHARS,
    TriggerBuffer,
    for_run,
    json_chars,
    message_key,
    preview,
)
from fleet_agent.models import AgentConfig, Priority, RunInput, TriggerKind

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
STATES = ["loading", "running", "exited", "offline"]


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def run_input_bytes(buffer: TriggerBuffer) -> int:
    """What the triggers cost where they travel: a run's input."""
    inp = RunInput(agent_id="a", run=1, session=1, triggers=buffer.pending, config=AgentConfig())
    return len(inp.model_dump_json())


def test_state_changes_coalesce_per_instance_and_count() -> None:
    buf = TriggerBuffer([], [])
    for i in range(10_000):
        refused = buf.add_state_change(
            i + 1,
            at(i * 0.001),
            instance_id=str(i % 200),
            old_state=STATES[i % 4],
            new_state=STATES[(i + 1) % 4],
            detail=f"change {i}",
        )
        assert refused is None
    assert len(buf.pending) == 200
    assert sum(t.count for t in buf.pending) == 10_000
    first = next(t for t in buf.pending if t.instance_id == "7")
    # First old state, last new state, the seqs it stands for.
    assert first.old_state == STATES[7 % 4]
    assert first.new_state == STATES[(9807 + 1) % 4]
    assert (first.seq, first.last_seq) == (8, 9808)
    assert first.detail == "change 9807"
    seqs = sorted(s for t in buf.pending for s in t.seqs if (s - t.seq) % 200 == 0)
    assert len(seqs) == 10_000 and seqs == list(range(1, 10_001))
    assert run_input_bytes(buf) < 256_000
    assert buf.first_at(Priority.P1) == T0
    # The size kept by folding (a difference per change) is the size counted afresh.
    assert buf.bytes == TriggerBuffer(list(buf.pending), []).bytes


def test_a_change_folds_only_into_its_own_instance() -> None:
    buf = TriggerBuffer([], [])
    assert not buf.folds_change_of("1")
    buf.add_state_change(1, at(0), instance_id="1", old_state=None, new_state="running", detail="")
    assert buf.folds_change_of("1") and not buf.folds_change_of("10")
    buf.take()
    assert not buf.folds_change_of("1")


def test_500_long_messages_fit_once_their_texts_are_stored() -> None:
    buf = TriggerBuffer([], [])
    accepted = 0
    for i in range(500):
        text = f"message {i} " + "x" * 19_980
        if buf.add_message(i + 1, at(i), text, "operator") is None:
            accepted += 1
        # The stash activity keeps up: texts go to the store as they come.
        buf.mark_stored(buf.unstored_keys)
    assert accepted == 500
    assert all(len(t.text) <= PREVIEW_CHARS for t in buf.pending)
    assert all(
        t.text_key == message_key(t.seq, f"message {t.seq - 1} " + "x" * 19_980)
        for t in buf.pending
    )
    assert buf.bytes <= MAX_PENDING_BYTES
    assert run_input_bytes(buf) < 256_000


def test_unstored_texts_are_bounded_and_refused_visibly() -> None:
    buf = TriggerBuffer([], [])
    text = "y" * 20_000
    results = [buf.add_message(i + 1, at(i), text, "op") for i in range(60)]
    accepted = [r for r in results if r is None]
    refused = [r for r in results if r is not None]
    assert len(accepted) == MAX_UNSTORED_BYTES // json_chars(text)
    assert refused and "waiting for the store" in refused[0].reason
    items = buf.unstored_items(max_chars=10**9)
    assert len(items) == len(accepted) and items[0].text == text
    buf.mark_stored([items[0].key])
    assert buf.add_message(100, at(100), text, "op") is None


def test_the_byte_budget_refuses_new_instances_but_keeps_coalescing() -> None:
    buf = TriggerBuffer([], [])
    n = 0
    while (
        buf.add_state_change(
            n + 1,
            at(0),
            instance_id=f"inst-{n:06d}",
            old_state=None,
            new_state="loading",
            detail="",
        )
        is None
    ):
        n += 1
    assert buf.bytes <= MAX_PENDING_BYTES
    assert len(buf.pending) == n
    # An instance already pending still takes its news.
    assert (
        buf.add_state_change(
            10**6,
            at(1),
            instance_id="inst-000000",
            old_state="loading",
            new_state="running",
            detail="",
        )
        is None
    )
    assert buf.pending[0].new_state == "running" and buf.pending[0].count == 2
    assert run_input_bytes(buf) < 256_000


def test_rebuilding_from_state_keeps_indexes_firsts_and_unstored_texts() -> None:
    buf = TriggerBuffer([], [])
    buf.add_state_change(1, at(5), instance_id="1", old_state=None, new_state="loading", detail="")
    buf.add_message(2, at(7), "hello " * 50, "op")
    buf.add_trigger_now(3, at(8), "look")
    again = TriggerBuffer([t.model_copy() for t in buf.pending], buf.unstored_keys)
    assert again.firsts == {Priority.P1: at(5), Priority.P0: at(7)}
    assert again.bytes == buf.bytes
    assert again.unstored_keys == buf.unstored_keys
    again.add_state_change(
        4, at(9), instance_id="1", old_state="loading", new_state="running", detail=""
    )
    again.add_trigger_now(5, at(9), "look")
    assert [t.count for t in again.pending] == [2, 1, 2]


def test_take_empties_everything() -> None:
    buf = TriggerBuffer([], [])
    buf.add_config_change(1, at(0), "target: 0 → 500")
    buf.add_config_change(2, at(1), "max_instances: 20 → 5")
    taken = buf.take()
    assert len(taken) == 1 and taken[0].kind == TriggerKind.CONFIG_CHANGED
    assert taken[0].reason == "target: 0 → 500; max_instances: 20 → 5" and taken[0].count == 2
    assert buf.pending == [] and buf.bytes == 0 and buf.firsts == {}


def test_preview_is_one_line_and_marked_when_cut() -> None:
    assert preview("a\n b") == "a b"
    long = preview("z" * 500)
    assert len(long) == PREVIEW_CHARS and long.endswith("…")


def test_a_taken_text_not_stored_yet_is_carried_and_given_by_the_query() -> None:
    """A run took the message (its input has the preview: `for_run`) and the
    store has not got the text: a continue-as-new carries it (`taken_unstored`),
    the next execution's query still hands it out, and storing it forgets it."""
    text = "Hold 400 proofs/h. " + "Because. " * 60
    buf = TriggerBuffer([], [])
    assert buf.add_message(1, at(0), text, "op") is None
    taken = buf.take()
    carried = for_run(taken)
    assert carried[0].text == preview(text) and taken[0].text == text
    assert [i.text for i in buf.unstored_items()] == [text]
    handed = buf.taken_unstored()
    assert [i.text for i in handed] == [text]

    again = TriggerBuffer([], buf.unstored_keys, handed)
    assert again.unstored_keys == buf.unstored_keys and again.unstored_bytes == buf.unstored_bytes
    assert [i.text for i in again.unstored_items()] == [text]
    assert again.pending == [], "a taken message is not run again"
    again.mark_stored(again.unstored_keys)
    assert again.unstored_keys == [] and again.taken_unstored() == []


def test_a_pending_text_is_not_handed_over_twice() -> None:
    buf = TriggerBuffer([], [])
    buf.add_message(1, at(0), "still waiting for its run " * 10, "op")
    assert buf.taken_unstored() == [], "its text travels in the pending trigger"
