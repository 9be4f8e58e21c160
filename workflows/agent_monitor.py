"""The agent's link to its fleet monitor (`<agent>/monitor`, workflows/monitor.py).

The monitor is a child started with ParentClosePolicy.ABANDON: it outlives
the agent's continue-as-new, so an execution that finds it running already
sends it its part of the config instead. A frozen agent's monitor is
disabled (it ends within a poll).

`MonitorLink` keeps no state of the agent's: it knows the agent's ID, and
each call is handed the config in force (FleetAgentWorkflow, workflows/agent.py,
decides when the monitor must hear of it). Deterministic: workflow code.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and the monitor's workflow class.
    from fleet_agent.models import AgentConfig, MonitorConfig, MonitorInput
    from workflows.monitor import FleetMonitorWorkflow
    from workflows.policies import MONITOR_PRIORITY

__all__ = ["MonitorLink", "monitor_config"]


def monitor_config(config: AgentConfig) -> MonitorConfig:
    """The monitor's part of the agent's config."""
    return MonitorConfig(
        poll_seconds=config.monitor_poll_seconds,
        target_proofs_per_hour=config.target_proofs_per_hour,
        # A frozen agent's monitor stops: no triggers, no reconcile.
        enabled=config.monitor_enabled and not config.frozen,
        not_proving_minutes=config.not_proving_minutes,
        offline_grace_minutes=config.offline_grace_minutes,
        min_release_age_minutes=config.min_release_age_minutes,
        failed_host_ttl_hours=config.failed_host_ttl_hours,
        spare_one_machine=config.spare_one_machine,
        notify_events=list(config.notify_events),
        notify_under_target_minutes=config.notify_under_target_minutes,
        notify_quiet_minutes=config.notify_quiet_minutes,
        target_mode=config.target_mode,
        demand_policy=config.demand_policy() if config.target_mode == "demand" else None,
        demand_events=list(config.demand_events),
        market_mode=config.market_mode,
        market_policy=config.market_policy() if config.market_mode == "snark" else None,
        min_target=config.min_target,
    )


class MonitorLink:
    """Starts the monitor, or tells the running one the config it should poll by."""

    def __init__(self, agent_id: str) -> None:
        self._agent_id = agent_id

    async def ensure(self, config: AgentConfig) -> None:
        """Start `<agent>/monitor` unless it runs already (it outlives continue-as-new)."""
        part = monitor_config(config)
        if not part.enabled:
            return
        agent_id = self._agent_id
        try:
            monitor = await workflow.start_child_workflow(
                FleetMonitorWorkflow.run,
                MonitorInput(agent_id=agent_id, config=part),
                id=f"{agent_id}/monitor",
                task_queue=workflow.info().task_queue,
                # Abandon: a continue-as-new of the agent must not stop the monitor.
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary="fleet monitor",
                priority=MONITOR_PRIORITY,
            )
            # Nobody awaits the monitor's end; read its outcome so a terminated
            # monitor is not reported as an exception never retrieved.
            monitor.add_done_callback(lambda t: t.cancelled() or t.exception())
        except WorkflowAlreadyStartedError:
            await self.configure(config)

    async def configure(self, config: AgentConfig) -> None:
        """Send the running monitor its part of the config (it may have ended: logged)."""
        handle = workflow.get_external_workflow_handle(f"{self._agent_id}/monitor")
        try:
            await handle.signal(FleetMonitorWorkflow.configure, monitor_config(config))
        except FailureError as exc:
            workflow.logger.info("monitor not reachable: %s", exc)
