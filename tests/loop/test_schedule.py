"""When the agent's next run is due (`fleet_agent.loop.schedule.next_due`): debounce
windows per priority, wakes, the heartbeat, and nothing while paused. Pure: no server."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from fleet_agent.loop.schedule import next_due
from fleet_agent.loop.triggers import TriggerBuffer
from fleet_agent.models import AgentConfig, Priority, Trigger, TriggerKind, Wake
from tests.helpers.loop import T0, at, trig, wake


def firsts_of(pending: list[Trigger]) -> dict[Priority, datetime]:
    """When each priority's oldest trigger arrived, as the agent's buffer keeps it."""
    return TriggerBuffer([t.model_copy() for t in pending], []).firsts


def due_offset(pending: list[Trigger], wakes: list[Wake] | None = None, **config: Any) -> float:
    due = next_due(
        firsts=firsts_of(pending),
        wakes=wakes or [],
        config=AgentConfig(**config),
        heartbeat_from=T0,
    )
    assert due is not None
    return (due.at - T0).total_seconds()


def test_nothing_pending_runs_at_the_heartbeat() -> None:
    due = next_due(firsts=firsts_of([]), wakes=[], config=AgentConfig(), heartbeat_from=T0)
    assert due is not None
    assert (due.at, due.cause, due.label) == (at(300), "heartbeat", "heartbeat")


def test_heartbeat_counts_from_the_last_run_end() -> None:
    ended = at(1234.5)
    due = next_due(
        firsts=firsts_of([]),
        wakes=[],
        config=AgentConfig(heartbeat_seconds=600),
        heartbeat_from=ended,
    )
    assert due is not None and due.at == ended + timedelta(seconds=600)


@pytest.mark.parametrize(
    ("kind", "offsets", "window"),
    [
        (TriggerKind.STATE_CHANGED, [0, 3, 6, 9.9], 10),
        (TriggerKind.STATE_CHANGED, [2, 0, 5], 10),  # order of arrival in the list is irrelevant
        (TriggerKind.HUMAN_MESSAGE, [0, 0.5, 1.9], 2),
        (TriggerKind.TRIGGER_NOW, [0, 1], 2),
    ],
)
def test_debounce_window_is_fixed_from_the_first_trigger_of_the_batch(
    kind: TriggerKind, offsets: list[float], window: float
) -> None:
    pending = [trig(kind, o) for o in offsets]
    assert due_offset(pending) == min(offsets) + window
    due = next_due(firsts=firsts_of(pending), wakes=[], config=AgentConfig(), heartbeat_from=T0)
    assert due is not None and due.cause == "debounce"


def test_a_steady_stream_never_postpones_the_run() -> None:
    pending = [trig(TriggerKind.STATE_CHANGED, i * 0.5) for i in range(100)]  # 50 s of changes
    assert due_offset(pending) == 10


def test_p0_shortens_a_p1_window() -> None:
    pending = [trig(TriggerKind.STATE_CHANGED, 0), trig(TriggerKind.HUMAN_MESSAGE, 5)]
    assert due_offset(pending) == 7


def test_p1_never_lengthens_a_p0_window() -> None:
    pending = [trig(TriggerKind.HUMAN_MESSAGE, 0), trig(TriggerKind.STATE_CHANGED, 1)]
    assert due_offset(pending) == 2


def test_late_p0_does_not_postpone_an_open_p1_window() -> None:
    pending = [trig(TriggerKind.STATE_CHANGED, 0), trig(TriggerKind.TRIGGER_NOW, 9)]
    assert due_offset(pending) == 10


def test_windows_come_from_the_config() -> None:
    pending = [trig(TriggerKind.STATE_CHANGED, 0)]
    assert due_offset(pending, p1_debounce_seconds=42) == 42
    due = next_due(
        firsts=firsts_of(pending),
        wakes=[],
        config=AgentConfig(p1_debounce_seconds=42),
        heartbeat_from=T0,
    )
    assert due is not None and due.label == "debounce P1 42s"


def test_a_pending_heartbeat_trigger_opens_no_window() -> None:
    assert due_offset([trig(TriggerKind.HEARTBEAT, 0)]) == 300


def test_earliest_wake_wins_over_the_heartbeat() -> None:
    wakes = [wake("w2", 200, "second"), wake("w1", 100, "first"), wake("w3", 250)]
    due = next_due(firsts=firsts_of([]), wakes=wakes, config=AgentConfig(), heartbeat_from=T0)
    assert due is not None
    assert (due.at, due.cause, due.label) == (at(100), "wake", "wake: first")


def test_debounce_before_a_later_wake_and_wake_before_a_later_window() -> None:
    assert due_offset([trig(TriggerKind.STATE_CHANGED, 0)], [wake("w", 60)]) == 10
    assert due_offset([trig(TriggerKind.STATE_CHANGED, 0)], [wake("w", 4)]) == 4


def test_heartbeat_before_an_open_window_wins() -> None:
    # The last run ended 295 s ago: the heartbeat is due before the P1 window.
    due = next_due(
        firsts=firsts_of([trig(TriggerKind.STATE_CHANGED, 0)]),
        wakes=[],
        config=AgentConfig(),
        heartbeat_from=at(-295),
    )
    assert due is not None and (due.at, due.cause) == (at(5), "heartbeat")


def test_nothing_is_due_while_paused() -> None:
    assert (
        next_due(
            firsts=firsts_of([trig(TriggerKind.HUMAN_MESSAGE, 0)]),
            wakes=[wake("w", 1)],
            config=AgentConfig(paused=True),
            heartbeat_from=T0,
        )
        is None
    )
