"""`record_market` through a stand-in meter: one market point sets the
market's gauges, labelled by the agent alone (as `record_demand`'s); the
figures a point lacks leave their gauges as they were."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
import temporalio.workflow

from tests.helpers.market_points import market_point
from workflows import metrics


class _Meter:
    """Stands in for the workflow's metric meter: keeps each gauge's last
    value and the attributes the meter was given; has nothing else, so any
    other call (a counter, a command) fails the test."""

    def __init__(self, values: dict[str, float], labels: list[dict[str, str]]) -> None:
        self.values = values
        self.labels = labels

    def with_additional_attributes(self, additional_attributes: Any) -> _Meter:
        self.labels.append(dict(additional_attributes))
        return self

    def _gauge(self, name: str, *_: Any) -> Any:
        values = self.values

        class Gauge:
            def set(self, value: float, attributes: Any = None) -> None:
                assert attributes is None, "no label beyond agent_id"
                if value < 0:  # as the SDK's meter does (temporalio/runtime.py)
                    raise ValueError("Metric value cannot be negative")
                values[name] = value

        return Gauge()

    create_gauge = create_gauge_float = _gauge


POINT = market_point(datetime(2026, 12, 6, 12, 0, tzinfo=UTC))
MARKET_GAUGES = {
    "fleet_market_slots_total": 10,
    "fleet_market_slots_used": 4,
    "fleet_market_challenges": 512,
    "fleet_market_price_nfil": 5_000_000,
    "fleet_market_market_price_nfil": 4_000_000,
    "fleet_market_revenue_usd_per_hour": 6.0,
    "fleet_market_cost_usd_per_hour": 4.0,
    "fleet_market_profit_usd_per_hour": 2.0,
    "fleet_market_loss_usd_per_hour": 0.0,
    "fleet_market_requests_enabled": 1,
    "fleet_market_queue_waiting": 3,
}


def test_a_market_point_sets_the_market_gauges(monkeypatch: pytest.MonkeyPatch) -> None:
    values: dict[str, float] = {}
    labels: list[dict[str, str]] = []
    monkeypatch.setattr(temporalio.workflow, "metric_meter", lambda: _Meter(values, labels))
    metrics.record_market("a", POINT)
    assert values == MARKET_GAUGES
    assert labels == [{"agent_id": "a"}]
    values.clear()
    unknown = POINT.model_copy(
        update={
            "market_price_nfil": None,
            "revenue_usd_per_h": None,
            "profit_usd_per_h": None,
            "enabled": False,
        }
    )
    metrics.record_market("a", unknown)
    left = {"fleet_market_market_price_nfil", "fleet_market_revenue_usd_per_hour"}
    left |= {"fleet_market_profit_usd_per_hour", "fleet_market_loss_usd_per_hour"}
    assert set(values) == set(MARKET_GAUGES) - left, "unknown figures: left as they were"
    assert values["fleet_market_requests_enabled"] == 0


def test_a_loss_sets_the_loss_gauge_and_never_a_negative_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A negative gauge value raises in the SDK, inside the monitor's workflow
    task: the task would fail at every retry (seen on `make run`)."""
    values: dict[str, float] = {}
    monkeypatch.setattr(temporalio.workflow, "metric_meter", lambda: _Meter(values, []))
    losing = POINT.model_copy(update={"profit_usd_per_h": -1.25})
    metrics.record_market("a", losing)
    assert values["fleet_market_profit_usd_per_hour"] == 0.0
    assert values["fleet_market_loss_usd_per_hour"] == 1.25
