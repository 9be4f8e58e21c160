"""Demand mode's step, pure (fleet_agent/demand/step.py): the windows it
reads, and a decision on a reading and its history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_agent.demand.forecast import MAX_DAYS, DemandEvent
from fleet_agent.demand.point import DemandStepRequest
from fleet_agent.demand.reading import DemandReading, DemandSample
from fleet_agent.demand.step import decide, history_windows
from fleet_agent.demand.target import DemandPolicy

NOW = datetime(2026, 12, 6, 14, 0, tzinfo=UTC)
POLICY = DemandPolicy(min_target=100, max_target=3000, lead_minutes=30, headroom=0.2)


def _reading(arrived: int, queued: int = 0) -> DemandReading:
    return DemandReading(as_of=NOW, queued=queued, in_flight=0, arrived_total=arrived)


def _request(current: float = 500, capacity: float = 500, **extra: object) -> DemandStepRequest:
    return DemandStepRequest.model_validate(
        {
            "agent_id": "a",
            "capacity_per_h": capacity,
            "current_target": current,
            "policy": POLICY,
            **extra,
        }
    )


def test_the_windows_are_the_last_hour_and_this_time_of_each_earlier_day() -> None:
    spans = history_windows(NOW, 45)
    assert spans[0] == (NOW - timedelta(hours=1), NOW)
    assert len(spans) == 1 + MAX_DAYS
    for day, (start, end) in enumerate(spans[1:], start=1):
        assert start == NOW - timedelta(days=day)
        assert end - start == timedelta(minutes=45)
    # A short lead reads at least half an hour of each day.
    assert history_windows(NOW, 5)[1][1] - history_windows(NOW, 5)[1][0] == timedelta(minutes=30)


def _rate_history(per_h: float, days: int) -> list[DemandSample]:
    """`per_h` arrivals an hour, sampled every 10 minutes, over the last hour
    and the windows of `days` earlier days."""
    samples, total = [], 0
    for start, end in sorted(history_windows(NOW, POLICY.lead_minutes)[: 1 + days]):
        at = start
        while at <= end:
            samples.append(DemandSample(at=at, arrived_total=total))
            total += round(per_h / 6)
            at += timedelta(minutes=10)
    return samples


def test_a_decision_follows_the_history_and_the_point_carries_its_figures() -> None:
    history = _rate_history(1200, days=2)
    last = history[-1].arrived_total
    decision, point = decide(_reading(last + 10), history, _request())
    assert decision.action == "raise"
    assert decision.target_per_h > 1200, decision.reason
    assert point.at == NOW
    assert point.target_per_h == decision.target_per_h
    assert point.forecast_per_h == round(decision.forecast_per_h, 3)
    assert point.recent_per_h is not None
    assert point.reason == decision.reason


def test_an_event_ahead_raises_the_target_before_it_starts() -> None:
    history = _rate_history(600, days=1)
    last = history[-1].arrived_total
    event = DemandEvent(
        start=NOW + timedelta(minutes=20), end=NOW + timedelta(hours=2), multiplier=3
    )
    plain, _ = decide(_reading(last), history, _request(current=800))
    ahead, _ = decide(_reading(last), history, _request(current=800, events=[event]))
    assert plain.action == "hold", plain.reason
    assert ahead.action == "raise"
    assert ahead.forecast_per_h == 3 * plain.forecast_per_h
