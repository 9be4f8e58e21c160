"""The paces' pure rules (fleet_agent/loop/pace.py): demand changes in a
rolling hour, LLM dollars in a rolling hour; and who may push out a known
demand event (fleet_agent/demand/events.py)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from fleet_agent.demand.events import MAX_EVENTS, MODEL_SHARE, merge_event
from fleet_agent.demand.forecast import DemandEvent, EventOwner
from fleet_agent.loop.pace import (
    MAX_SPEND_MARKS,
    WINDOW,
    add_spend,
    hour_spend,
    in_window,
    next_slot,
    spend_release,
    usd,
)
from fleet_agent.models import SpendMark

T0 = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


def _min(m: float) -> datetime:
    return T0 + timedelta(minutes=m)


def test_a_change_fits_while_fewer_than_the_cap_fell_in_the_last_hour() -> None:
    times = [_min(0), _min(10), _min(20)]
    assert next_slot(times, _min(30), 4) is None
    # Three of three: one more fits when the first is an hour old.
    assert next_slot(times, _min(30), 3) == _min(60)
    # The cap lowered to one: two must leave first.
    assert next_slot(times, _min(30), 1) == _min(80)
    # An hour to the second: the first no longer counts.
    assert next_slot(times, _min(60), 3) is None
    assert in_window(times, _min(60)) == [_min(10), _min(20)]


def test_spend_holds_at_the_cap_until_enough_of_it_is_an_hour_old() -> None:
    marks = add_spend([], _min(0), 0.6, _min(0))
    marks = add_spend(marks, _min(20), 0.5, _min(20))
    assert hour_spend(marks, _min(25)) == pytest.approx(1.1)
    assert spend_release(marks, _min(25), 2.0) is None
    # At the cap counts: $1.10 of $1.10 holds.
    assert spend_release(marks, _min(25), 1.1) == _min(60)
    # Dropping the first mark leaves $0.50, still at a $0.50 cap: both must go.
    assert spend_release(marks, _min(25), 0.5) == _min(80)
    assert spend_release(marks, _min(61), 1.0) is None
    assert hour_spend(marks, _min(61)) == pytest.approx(0.5)


def test_spend_marks_stay_bounded_and_counted() -> None:
    marks: list[SpendMark] = []
    for n in range(MAX_SPEND_MARKS * 3):
        at = T0 + timedelta(seconds=10 * n)
        marks = add_spend(marks, at, 0.01, at)
    now = marks[-1].at
    assert len(marks) == MAX_SPEND_MARKS
    # Merged marks keep their cost, at a later time (counted longer, never shorter).
    expected = sum(
        0.01 for n in range(MAX_SPEND_MARKS * 3) if T0 + timedelta(seconds=10 * n) > now - WINDOW
    )
    assert hour_spend(marks, now) >= expected - 1e-9
    assert marks == sorted(marks, key=lambda m: m.at)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 0.0),
        (0.25, 0.25),
        (3, 3.0),
        (-1.0, 0.0),
        (math.nan, 0.0),
        (math.inf, 0.0),
        (True, 0.0),
        ("1", 0.0),
        (5e9, 1e6),
    ],
)
def test_a_cost_is_read_as_a_dollar_figure_a_model_takes(value: object, expected: float) -> None:
    assert usd(value) == expected


def _event(hours: float, by: EventOwner = "operator", x: float = 2.0) -> DemandEvent:
    start = T0 + timedelta(hours=hours)
    return DemandEvent(start=start, end=start + timedelta(hours=1), multiplier=x, set_by=by)


def test_the_model_never_removes_or_displaces_an_operators_event() -> None:
    operators = [_event(h) for h in range(1, MAX_EVENTS + 1)]
    merged = merge_event(operators, _event(30, "model"), T0)
    assert not merged.added and merged.events == operators and merged.dropped == []
    assert "an operator set" in merged.refused
    # Not even the one ending first, nor by a duplicate of it with another owner.
    again = merge_event(operators, _event(1, "model"), T0)
    assert again.events == operators and not again.added and not again.refused


def test_the_model_adds_within_its_share_pushing_out_only_its_own() -> None:
    events = [_event(h) for h in range(1, 6)]  # five of the operator's
    for h in range(10, 10 + MODEL_SHARE + 2):
        events = merge_event(events, _event(h, "model"), T0).events
    mine = [e for e in events if e.set_by == "model"]
    assert len(mine) == MODEL_SHARE
    assert [e.start for e in mine] == [_event(h).start for h in range(12, 12 + MODEL_SHARE)]
    assert [e for e in events if e.set_by == "operator"] == [_event(h) for h in range(1, 6)]
    # Where the operator's leave less room than the share, that room is the bound.
    crowded = [_event(h) for h in range(1, MAX_EVENTS - 1)] + [
        _event(40, "model"),
        _event(41, "model"),
    ]
    merged = merge_event(crowded, _event(42, "model"), T0)
    assert merged.added and merged.dropped == [_event(40, "model")]
    assert len(merged.events) == MAX_EVENTS


def test_an_operators_event_pushes_out_the_models_first() -> None:
    full = [_event(h) for h in range(1, MAX_EVENTS - 1)] + [
        _event(50, "model"),
        _event(51, "model"),
    ]
    merged = merge_event(full, _event(60), T0)
    assert merged.added and merged.dropped == [_event(50, "model")]
    # Once only the operator's are left, their own that ends first goes.
    only = [_event(h) for h in range(1, MAX_EVENTS + 1)]
    assert merge_event(only, _event(60), T0).dropped == [_event(1)]
