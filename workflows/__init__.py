"""Temporal workflows of fleet-agent: the agent loop, one run, the fleet monitor."""

from workflows.agent import FleetAgentWorkflow
from workflows.monitor import FleetMonitorWorkflow
from workflows.run import AgentRunWorkflow

__all__ = ["AgentRunWorkflow", "FleetAgentWorkflow", "FleetMonitorWorkflow"]
