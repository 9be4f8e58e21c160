"""The Snark Market: the monitor's part (AgentConfig.market_mode = "snark").

After each poll the monitor (workflows/monitor.py) asks `observe_market`
(activities/market.py) for the business of the worker's Curio node: it
reads the node, counts the challenge ledger, prices the hour (revenue,
rental, LLM, profit) and keeps the point in the store, where `status`, the
console and the model's context read it. The monitor owns this, as it owns
demand (monitor_demand.py): a loss must be seen between runs.

When the point says the fleet has proved at a loss for
`market_loss_minutes`, the monitor acts once per loss (until it pays
again): it tells the operator (`market_loss`), wakes a run with the
alert (the agent's `trigger_now`: the model or the autopilot hears it),
and by `market_on_loss`: `lower` signals demand mode a target of the
machines that pay for themselves (fleet_agent/fleet/paying.py), `stop`
turns the node's requests off (activity `set_requests`, guarded as the
tool is). No reading changes nothing; a failed activity or signal is
logged and tried again at the next poll; a poll never fails for the market.

Touches: the activities observe_market (→ the Curio node, the market's
price, the store), send_notification and set_requests; the agent, by signal;
the market gauges (workflows/metrics.py). New commands only under
`MONITOR_MARKET_PATCH`. Deterministic: workflow code.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules only.
    from fleet_agent.fleet.paying import paying_capacity, revenue_per_proof_usd
    from fleet_agent.fleet.snapshot import FleetSnapshot
    from fleet_agent.market.point import (
        MarketPoint,
        MarketPolicy,
        MarketStepRequest,
        RequestsChange,
    )
    from fleet_agent.models import (
        DEMAND_TARGET,
        DemandTargetChange,
        MonitorConfig,
        NotifyEvent,
        TriggerNow,
    )
    from workflows import stubs
    from workflows.metrics import record_market
    from workflows.monitor_band import send_event

__all__ = ["MONITOR_MARKET_PATCH", "MarketFollower"]

#: Monitors that record it read the market when their agent's market_mode says so.
MONITOR_MARKET_PATCH = "monitor-market"
_TIMEOUT = timedelta(seconds=60)
# Read again at the next poll: a short retry covers a store blip only.
_RETRY = RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=1))


class MarketFollower:
    """The last reading's line, and the loss already acted on (its start),
    carried through continue-as-new in MonitorInput."""

    def __init__(self, acted_on: datetime | None) -> None:
        self.acted_on = acted_on
        self.last = ""

    async def after_poll(
        self,
        agent: workflow.ExternalWorkflowHandle[Any],
        agent_id: str,
        config: MonitorConfig,
        snap: FleetSnapshot,
    ) -> float | None:
        """Read the business on this poll; a lowered target if the agent took one."""
        policy = config.market_policy
        if config.market_mode != "snark" or policy is None:
            self.last = ""
            return None
        request = MarketStepRequest(
            agent_id=agent_id,
            policy=policy,
            gpus=sum(i.num_gpus for i in snap.instances if i.expected_proofs_per_hour > 0),
            gpus_proving=sum(i.num_gpus for i in snap.instances if i.proves()),
            capacity_per_h=max(snap.capacity_proofs_per_hour, 0.0),
            rental_usd_per_h=max(snap.fleet_dph, 0.0),
        )
        try:
            step = await workflow.execute_activity(
                stubs.observe_market,
                request,
                start_to_close_timeout=_TIMEOUT,
                retry_policy=_RETRY,
                summary="read the market: slots, price, revenue, profit",
            )
        except ActivityError as exc:
            workflow.logger.warning("market not observed: %s", exc.cause or exc)
            return None
        self.last = step.summary
        point = step.point
        if point is None:
            workflow.logger.info("%s", step.summary)
            return None
        # Emits no command: safe without a patch (workflows/metrics.py).
        record_market(agent_id, point)
        if point.loss_since is None:
            self.acted_on = None
            return None
        if not step.loss_alert or self.acted_on == point.loss_since:
            return None
        self.acted_on = point.loss_since
        return await self._act(agent, agent_id, config, snap, point, step.loss_alert)

    async def _act(
        self,
        agent: workflow.ExternalWorkflowHandle[Any],
        agent_id: str,
        config: MonitorConfig,
        snap: FleetSnapshot,
        point: MarketPoint,
        alert: str,
    ) -> float | None:
        policy = config.market_policy
        assert policy is not None
        action, target = "the operator is told; the fleet is left as it is", None
        per_proof = revenue_per_proof_usd(point.revenue_usd_per_h, point.paid_proofs_per_h)
        if policy.on_loss == "lower" and config.target_mode == "demand":
            paying = paying_capacity(snap.instances, per_proof or 0.0)
            target = max(config.min_target, paying)
            if target < config.target_proofs_per_hour:
                action = f"the target goes to {target:.0f} proofs/h, what pays for itself"
            else:
                target = None
        elif policy.on_loss == "lower":
            action = "fixed mode: the operator's target is left; the run is told"
        elif policy.on_loss == "stop":
            action = await _stop_asking(agent_id, policy, alert)
        if "market_loss" in config.notify_events:
            event = NotifyEvent.model_validate(
                {
                    "kind": "market_loss",
                    "subject": "snark market",
                    "at": workflow.now(),
                    "facts": {"alert": alert, "on_loss": policy.on_loss, "action": action},
                }
            )
            await send_event(agent_id, config, event)
        try:
            await agent.signal("trigger_now", TriggerNow(reason=f"{alert} ({action})"[:2_000]))
            if target is not None:
                change = DemandTargetChange(
                    target_per_h=target,
                    previous_per_h=config.target_proofs_per_hour,
                    action="lower",
                    reason=f"proving at a loss: {action}"[:600],
                )
                await agent.signal(DEMAND_TARGET, change)
        except FailureError as exc:
            workflow.logger.warning("market loss not delivered: %s", exc)
            self.acted_on = None  # acted on again at the next poll
            return None
        return target


async def _stop_asking(agent_id: str, policy: MarketPolicy, alert: str) -> str:
    """Requests off, and the open asks withdrawn, through the lever's own
    guard (activities/market.py): what it did, in one line."""
    change = RequestsChange(
        agent_id=agent_id,
        enabled=False,
        withdraw_open=True,
        reason=f"proving at a loss: {alert}"[:600],
        policy=policy,
    )
    try:
        result = await workflow.execute_activity(
            stubs.change_requests,
            change,
            start_to_close_timeout=_TIMEOUT,
            retry_policy=_RETRY,
            summary="market: stop asking for work (a loss)",
        )
    except ActivityError as exc:
        workflow.logger.warning("requests not turned off: %s", exc.cause or exc)
        return "turning requests off failed: the operator must"
    return result.summary if result.ok else f"requests not turned off: {result.refused}"
