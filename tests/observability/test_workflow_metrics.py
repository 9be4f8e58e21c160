"""The workflows' metrics through a stand-in meter: the monitor's poll sets the
fleet gauges, a demand decision the demand gauges, and P0 latency counts
operator triggers only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import temporalio.workflow

from fleet_agent.demand.point import DemandPoint, DemandStepResult
from fleet_agent.demand.target import DemandDecision, DemandPolicy
from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.models import MonitorConfig, Trigger, TriggerKind
from workflows import metrics
from workflows.monitor_demand import DemandFollower


class _Gauges:
    """Stands in for the workflow's metric meter: keeps the last value set on
    each gauge, and refuses anything else."""

    def __init__(self, values: dict[str, float]) -> None:
        self.values = values

    def with_additional_attributes(self, additional_attributes: Any) -> _Gauges:
        return self

    def _gauge(self, name: str, *_: Any) -> Any:
        values = self.values

        class Gauge:
            def set(self, value: float, attributes: Any = None) -> None:
                values[name] = value

        return Gauge()

    create_gauge = create_gauge_float = _gauge


def test_the_monitors_poll_sets_the_fleet_gauges(monkeypatch: pytest.MonkeyPatch) -> None:
    values: dict[str, float] = {}
    monkeypatch.setattr(temporalio.workflow, "metric_meter", lambda: _Gauges(values))
    snap = FleetSnapshot(
        target_proofs_per_hour=500,
        capacity_proofs_per_hour=420,
        expected_proofs_per_hour=480,
        fleet_dph=3.25,
    )
    metrics.record_fleet("a", snap)
    assert values == {
        "fleet_capacity_proofs_per_hour": 420,
        "fleet_expected_proofs_per_hour": 480,
        "fleet_dph_usd": 3.25,
        "fleet_instances": 0,
    }
    values.clear()
    metrics.record_fleet("a", FleetSnapshot(error="vast.ai down"))
    assert values == {}, "a failed poll leaves the last figures"


class _Recorder:
    """Stands in for the workflow's metric meter: keeps what counters add and
    histograms record, by metric name and labels."""

    def __init__(self) -> None:
        self.added: dict[tuple[str, str], int] = {}
        self.recorded: dict[str, list[float]] = {}

    def with_additional_attributes(self, additional_attributes: Any) -> _Recorder:
        return self

    def create_counter(self, name: str, *_: Any) -> Any:
        added = self.added

        class Counter:
            def add(self, value: int, attributes: dict[str, str]) -> None:
                key = (name, ",".join(f"{k}={v}" for k, v in sorted(attributes.items())))
                added[key] = added.get(key, 0) + value

        return Counter()

    def create_histogram_float(self, name: str, *_: Any) -> Any:
        recorded = self.recorded.setdefault(name, [])

        class Histogram:
            def record(self, value: float) -> None:
                recorded.append(value)

        return Histogram()


def test_p0_latency_counts_operator_triggers_only(monkeypatch: pytest.MonkeyPatch) -> None:
    meter = _Recorder()
    monkeypatch.setattr(temporalio.workflow, "metric_meter", lambda: meter)
    now = datetime(2026, 11, 29, 12, 0, 10, tzinfo=UTC)

    def trigger(kind: TriggerKind, seconds_ago: float, count: int = 1) -> Trigger:
        return Trigger(
            seq=0, kind=kind, received_at=now - timedelta(seconds=seconds_ago), count=count
        )

    metrics.record_run_started(
        "a",
        [
            trigger(TriggerKind.HUMAN_MESSAGE, 3.0),
            trigger(TriggerKind.TRIGGER_NOW, 1.5),
            trigger(TriggerKind.WAKE, 0.0),
            trigger(TriggerKind.STATE_CHANGED, 9.0, count=3),
        ],
        now,
    )
    assert meter.recorded == {"fleet_p0_latency_seconds": [3.0, 1.5]}
    assert meter.added == {
        ("fleet_run_triggers", "kind=human_message"): 1,
        ("fleet_run_triggers", "kind=trigger_now"): 1,
        ("fleet_run_triggers", "kind=wake"): 1,
        ("fleet_run_triggers", "kind=state_changed"): 3,
    }


POINT = DemandPoint(
    at=datetime(2026, 12, 6, 12, 0, tzinfo=UTC),
    queued=12,
    in_flight=3,
    recent_per_h=310,
    forecast_per_h=330,
    need_per_h=350,
    target_per_h=400,
    capacity_per_h=380,
    action="raise",
)
DEMAND_GAUGES = {
    "fleet_demand_arrivals_proofs_per_hour": 310,
    "fleet_demand_forecast_proofs_per_hour": 330,
    "fleet_demand_need_proofs_per_hour": 350,
    "fleet_demand_backlog": 15,
    "fleet_demand_target_proofs_per_hour": 400,
}


def test_a_demand_decision_sets_the_demand_gauges(monkeypatch: pytest.MonkeyPatch) -> None:
    values: dict[str, float] = {}
    monkeypatch.setattr(temporalio.workflow, "metric_meter", lambda: _Gauges(values))
    metrics.record_demand("a", POINT)
    assert values == DEMAND_GAUGES
    values.clear()
    metrics.record_demand("a", POINT.model_copy(update={"recent_per_h": None}))
    assert "fleet_demand_arrivals_proofs_per_hour" not in values, "no rate yet: left as it was"
    assert values["fleet_demand_backlog"] == 15


async def test_the_monitor_records_the_point_of_each_decision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DemandFollower.after_poll, its activity stood in for: the step's point
    reaches the gauges, whether or not the target moves."""
    values: dict[str, float] = {}
    monkeypatch.setattr(temporalio.workflow, "metric_meter", lambda: _Gauges(values))
    decision = DemandDecision(
        target_per_h=400,
        action="hold",
        need_per_h=350,
        forecast_per_h=330,
        backlog_per_h=0,
        backlog=15,
        at_risk=0,
        capacity_per_h=380,
        saturated=False,
        reason="hold",
    )

    async def step(*_: Any, **__: Any) -> DemandStepResult:
        return DemandStepResult(source="sim", decision=decision, point=POINT)

    monkeypatch.setattr(temporalio.workflow, "execute_activity", step)
    config = MonitorConfig(
        target_proofs_per_hour=400,
        target_mode="demand",
        demand_policy=DemandPolicy(max_target=900),
    )
    target = await DemandFollower(None, 0.0).after_poll(
        None,  # type: ignore[arg-type]  # the target holds: nothing is signalled
        "a",
        config,
        FleetSnapshot(capacity_proofs_per_hour=380),
    )
    assert target is None and values == DEMAND_GAUGES
