"""Demand mode: the monitor's part (AgentConfig.target_mode = "demand").

After each poll the monitor (workflows/monitor.py) asks `observe_demand`
(activities/demand.py) for a target: it reads the worker's demand source,
keeps the reading in the store's demand history, and decides by the rule
of fleet_agent/demand/target.py on the fleet's capacity of that poll. When
the target moves, the monitor signals `demand_target` to its agent, which
holds the new target and tells its next run why. The monitor owns this
rather than the agent for the same reason as the band (monitor_band.py): it
sees every poll, and a target must follow demand between runs.

No reading (the source down, a hostile answer) holds the target: nothing
is signalled, the refusal is logged and shown in the activity's result.
A failed activity or signal is logged and tried again at the next poll; a
poll never fails for demand.

Touches: the activity observe_demand (→ the demand source, the store);
the agent, by signal; the demand gauges (workflows/metrics.py). New
commands only under `MONITOR_DEMAND_PATCH`.
Deterministic: workflow code.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, FailureError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models only.
    from fleet_agent.demand.point import DemandStepRequest
    from fleet_agent.fleet.snapshot import FleetSnapshot
    from fleet_agent.models import DEMAND_TARGET, DemandTargetChange, MonitorConfig
    from workflows import stubs
    from workflows.metrics import record_demand

__all__ = ["MONITOR_DEMAND_PATCH", "DemandFollower"]

#: Monitors that record it follow demand when their agent's target_mode says so.
MONITOR_DEMAND_PATCH = "monitor-demand"
_TIMEOUT = timedelta(seconds=30)
# The source is read again at the next poll: a short retry only covers a
# store blip, never holds up the poll loop.
_RETRY = RetryPolicy(maximum_attempts=2, initial_interval=timedelta(seconds=1))


class DemandFollower:
    """The hysteresis memory of the target rule (carried through
    continue-as-new in MonitorInput) and the last decision's one line."""

    def __init__(self, below_since: datetime | None, below_peak: float) -> None:
        self.below_since = below_since
        self.below_peak = below_peak
        self.last = ""

    async def after_poll(
        self,
        agent: workflow.ExternalWorkflowHandle[Any],
        agent_id: str,
        config: MonitorConfig,
        snap: FleetSnapshot,
    ) -> float | None:
        """Decide on this poll; the new target if the agent took it, else None."""
        if config.target_mode != "demand" or config.demand_policy is None:
            self.below_since, self.below_peak, self.last = None, 0.0, ""
            return None
        current = config.target_proofs_per_hour
        request = DemandStepRequest(
            agent_id=agent_id,
            capacity_per_h=max(snap.capacity_proofs_per_hour, 0.0),
            current_target=current,
            policy=config.demand_policy,
            events=config.demand_events,
            below_since=self.below_since,
            below_peak=self.below_peak,
        )
        try:
            step = await workflow.execute_activity(
                stubs.observe_demand,
                request,
                start_to_close_timeout=_TIMEOUT,
                retry_policy=_RETRY,
                summary="read demand, decide the target",
            )
        except ActivityError as exc:
            workflow.logger.warning("demand not observed: %s", exc.cause or exc)
            return None
        self.last = step.summary
        if step.point is not None:
            # Emits no command: safe without a patch (workflows/metrics.py).
            record_demand(agent_id, step.point)
        decision = step.decision
        if decision is None:
            workflow.logger.info("%s", step.summary)
            return None
        if decision.target_per_h == current:
            self.below_since, self.below_peak = decision.below_since, decision.below_peak
            return None
        change = DemandTargetChange(
            target_per_h=decision.target_per_h,
            previous_per_h=current,
            action=decision.action,
            reason=decision.reason[:600],
            point=step.point,
        )
        try:
            await agent.signal(DEMAND_TARGET, change)
        except FailureError as exc:
            # Decided again at the next poll, from the same memory.
            workflow.logger.warning("demand target not delivered: %s", exc)
            return None
        self.below_since, self.below_peak = decision.below_since, decision.below_peak
        return decision.target_per_h
