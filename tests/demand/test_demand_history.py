"""The demand history in the store (`fa_demand_points`), on SQLite and
PostgreSQL: a retried write is a no-op, old points go, and the forecast
reads only the windows it needs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_agent.demand.point import DemandPoint
from fleet_agent.store import DemandHistory, Store
from fleet_agent.store.demand_history import KEEP_DAYS
from tests.helpers.store_backends import store_on_both_backends

__all__ = ["store_on_both_backends"]  # the fixture, imported for pytest

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _point(minutes: float, arrived: int, **extra: object) -> DemandPoint:
    return DemandPoint.model_validate(
        {"at": T0 + timedelta(minutes=minutes), "arrived_total": arrived, **extra}
    )


def test_a_point_is_kept_once_and_read_back_whole(store: Store) -> None:
    history = DemandHistory(store)
    point = _point(
        0,
        120,
        queued=7,
        in_flight=2,
        saturated=True,
        recent_per_h=300.5,
        forecast_per_h=310.0,
        need_per_h=372.0,
        target_per_h=400.0,
        capacity_per_h=380.0,
        at_risk=1,
        action="raise",
        reason="raise to 400.0/h: need 372.0/h",
    )
    assert history.record("a", point) is True
    assert history.record("a", point) is False, "a retried activity writes nothing twice"
    assert history.latest("a") == point
    assert history.latest("b") is None
    assert history.series("a", T0 - timedelta(hours=1)) == [point]


def test_points_older_than_the_kept_days_are_forgotten_per_agent(store: Store) -> None:
    history = DemandHistory(store)
    old = _point(-(KEEP_DAYS * 24 * 60) - 1, 1)
    history.record("a", old)
    history.record("b", old)
    history.record("a", _point(0, 2))
    since = T0 - timedelta(days=30)
    assert [p.arrived_total for p in history.series("a", since)] == [2]
    assert [p.arrived_total for p in history.series("b", since)] == [1], "only a's own"


def test_the_forecast_reads_only_its_windows_and_the_series_its_latest(store: Store) -> None:
    history = DemandHistory(store)
    for minute in range(0, 240, 10):
        history.record("a", _point(minute, minute))
    windows = [
        (T0 + timedelta(minutes=30), T0 + timedelta(minutes=50)),
        (T0 + timedelta(minutes=200), T0 + timedelta(minutes=210)),
    ]
    samples = history.samples("a", windows)
    assert [s.arrived_total for s in samples] == [30, 40, 50, 200, 210]
    assert history.samples("a", []) == []
    latest = history.series("a", T0, limit=3)
    assert [p.arrived_total for p in latest] == [210, 220, 230], "the latest, oldest first"
