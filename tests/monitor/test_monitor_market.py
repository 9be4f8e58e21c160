"""The monitor's market step (workflows/monitor_market.py) on the time-skipping
server, the real `FleetMonitorWorkflow` with stand-in activities: a loss that
lasts is acted on once (the operator told, a run woken, requests off by
`market_on_loss=stop`), however many polls see it; a loss that ends and comes
back is acted on again; `lower` in demand mode signals a target of the
machines that pay for themselves; a monitor outside market mode never reads
the market."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RawValue
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from fleet_agent.fleet.snapshot import FleetInstance, FleetSnapshot
from fleet_agent.market.point import (
    MarketLeverResult,
    MarketPoint,
    MarketPolicy,
    MarketStepRequest,
    MarketStepResult,
    RequestsChange,
)
from fleet_agent.models import MonitorConfig, MonitorInput, NotifyRequest, NotifyResult, PollRequest
from tests.helpers import eventually
from workflows.monitor import FleetMonitorWorkflow

POLL = 30
START = datetime(2026, 12, 7, 12, tzinfo=UTC)


@workflow.defn(name="FakeAgent", sandboxed=False)
class FakeAgent:
    """Records every signal the monitor sends it."""

    def __init__(self) -> None:
        self.signals: list[tuple[str, Any]] = []

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.signal(dynamic=True)
    def any_signal(self, name: str, args: Sequence[RawValue]) -> None:
        value = workflow.payload_converter().from_payload(args[0].payload) if args else None
        self.signals.append((name, value))

    @workflow.query
    def seen(self) -> list[tuple[str, Any]]:
        return self.signals


class Stand:
    """The activities the monitor calls, with what they were called with."""

    def __init__(self, losses: list[datetime | None]) -> None:
        self.losses = losses  # the loss_since of each reading in turn (the last repeats)
        self.reads: list[MarketStepRequest] = []
        self.notified: list[NotifyRequest] = []
        self.stopped: list[RequestsChange] = []

    @activity.defn(name="poll_fleet")
    async def poll_fleet(self, req: PollRequest) -> FleetSnapshot:
        return FleetSnapshot(
            instances=[
                FleetInstance(
                    id=1,
                    label="l1",
                    state="running",
                    gpu="RTX 4090",
                    num_gpus=1,
                    dph=0.4,
                    proofs_per_hour=30,
                    expected_proofs_per_hour=30,
                ),
                FleetInstance(
                    id=2,
                    label="l2",
                    state="running",
                    gpu="A100",
                    num_gpus=1,
                    dph=1.5,
                    proofs_per_hour=30,
                    expected_proofs_per_hour=30,
                ),
            ],
            target_proofs_per_hour=req.target_proofs_per_hour,
            capacity_proofs_per_hour=60,
            fleet_dph=1.9,
            agent_open=True,
        )

    @activity.defn(name="observe_market")
    async def observe_market(self, req: MarketStepRequest) -> MarketStepResult:
        self.reads.append(req)
        since = self.losses[min(len(self.reads), len(self.losses)) - 1]
        point = MarketPoint(
            at=activity.info().current_attempt_scheduled_time,
            enabled=True,
            gpus=req.gpus,
            paid_proofs_per_h=40,
            revenue_usd_per_h=0.8,  # $0.02 a proof: the RTX pays ($0.013), the A100 not
            rental_usd_per_h=req.rental_usd_per_h,
            cost_usd_per_h=req.rental_usd_per_h,
            profit_usd_per_h=0.8 - req.rental_usd_per_h,
            loss_since=since,
        )
        alert = "market: proving at a loss since 12:00, revenue $0.80/h" if since else ""
        return MarketStepResult(point=point, loss_alert=alert)

    @activity.defn(name="send_notification")
    async def send_notification(self, req: NotifyRequest) -> NotifyResult:
        self.notified.append(req)
        return NotifyResult(sent=1, configured=1)

    @activity.defn(name="change_requests")
    async def change_requests(self, req: RequestsChange) -> MarketLeverResult:
        self.stopped.append(req)
        return MarketLeverResult(ok=True, withdrawn=2, challenges_spent=2, summary="requests off")


async def _monitor(
    env: WorkflowEnvironment, stand: Stand, config: MonitorConfig, polls: int
) -> list[tuple[str, Any]]:
    queue = f"mm-{uuid.uuid4().hex[:8]}"
    agent_id = f"agent-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[FleetMonitorWorkflow, FakeAgent],
        activities=[
            stand.poll_fleet,
            stand.observe_market,
            stand.send_notification,
            stand.change_requests,
        ],
    ):
        agent = await env.client.start_workflow(FakeAgent.run, id=agent_id, task_queue=queue)
        await env.client.start_workflow(
            FleetMonitorWorkflow.run,
            MonitorInput(agent_id=agent_id, config=config),
            id=f"{agent_id}/monitor",
            task_queue=queue,
        )

        async def polled() -> bool:
            await env.sleep(POLL)
            return len(stand.reads) >= polls or config.market_mode != "snark"

        await eventually(polled, timeout=60, what=f"{polls} market reads")
        if config.market_mode != "snark":
            await env.sleep(POLL * polls)
        seen: list[tuple[str, Any]] = await agent.query(FakeAgent.seen)
        return seen


def _config(**over: Any) -> MonitorConfig:
    fields: dict[str, Any] = {
        "poll_seconds": POLL,
        "target_proofs_per_hour": 60,
        "notify_events": ["market_loss"],
        "market_mode": "snark",
        "market_policy": MarketPolicy(on_loss="stop"),
    }
    fields.update(over)
    return MonitorConfig(**fields)


async def test_a_lasting_loss_is_acted_on_once_and_again_when_it_comes_back(
    ts_env: WorkflowEnvironment,
) -> None:
    first, second = START, START + timedelta(hours=3)
    stand = Stand([None, first, first, first, first, None, second, second])
    seen = await _monitor(ts_env, stand, _config(), polls=9)
    assert [r.gpus for r in stand.reads[:1]] == [2] and stand.reads[0].rental_usd_per_h == 1.9
    assert [n.event.kind for n in stand.notified] == ["market_loss", "market_loss"]
    assert stand.notified[0].event.facts["on_loss"] == "stop"
    assert [(c.enabled, c.withdraw_open) for c in stand.stopped] == [(False, True)] * 2
    wakes = [v for name, v in seen if name == "trigger_now"]
    assert len(wakes) == 2
    assert wakes[0]["reason"].startswith("market: proving at a loss since 12:00")
    assert "requests off" in wakes[0]["reason"]


async def test_lower_in_demand_mode_targets_the_machines_that_pay(
    ts_env: WorkflowEnvironment,
) -> None:
    stand = Stand([START])
    config = _config(market_policy=MarketPolicy(on_loss="lower"), target_mode="demand")
    seen = await _monitor(ts_env, stand, config, polls=3)
    targets = [v for name, v in seen if name == "demand_target"]
    assert len(targets) == 1, seen
    assert targets[0]["target_per_h"] == 30 and targets[0]["action"] == "lower"
    assert stand.stopped == []  # lower, not stop


async def test_no_market_mode_reads_no_market(ts_env: WorkflowEnvironment) -> None:
    stand = Stand([START])
    seen = await _monitor(ts_env, stand, _config(market_mode="off"), polls=3)
    assert stand.reads == [] and stand.notified == [] and seen == []
