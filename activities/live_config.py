"""The agent's config at the moment of a fleet tool call, not at the start of its run.

A run carries the config it started with; an `update_config` accepted since
(dry_run on, a cap lowered, paused) must still stop the run's next create.
Fleet activities therefore ask the agent workflow for its config right before
acting, through the read-only `live_config` query of FleetAgentWorkflow.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Protocol

from temporalio import activity
from temporalio.client import Client

from fleet_agent.models import AgentConfig

__all__ = [
    "LIVE_CONFIG_QUERY",
    "ConfigSource",
    "LiveConfigUnavailable",
    "WorkflowConfigSource",
]

#: The query of FleetAgentWorkflow that answers its current `AgentConfig`.
LIVE_CONFIG_QUERY = "live_config"

_QUERY_TIMEOUT = timedelta(seconds=5)


class LiveConfigUnavailable(Exception):
    """The agent's live config could not be read."""


class ConfigSource(Protocol):
    """Where fleet activities read an agent's config at the moment of a call."""

    async def live_config(self, agent_id: str) -> AgentConfig:
        """The agent's config now; raises `LiveConfigUnavailable` if it cannot tell."""
        ...


class WorkflowConfigSource:
    """Queries the agent workflow (workflow ID = agent ID) with `live_config`.

    Uses `client` if given, else the client of the running activity
    (`activity.client()`, available in async activities).
    """

    def __init__(self, client: Client | None = None, *, timeout: timedelta = _QUERY_TIMEOUT):
        self._client = client
        self._timeout = timeout

    async def live_config(self, agent_id: str) -> AgentConfig:
        try:
            client = self._client or activity.client()
            config: AgentConfig = await client.get_workflow_handle(agent_id).query(
                LIVE_CONFIG_QUERY, result_type=AgentConfig, rpc_timeout=self._timeout
            )
        except Exception as exc:
            # Whatever went wrong (no client, agent gone, query failed or timed
            # out), the caller decides: never mutate on a stale config.
            raise LiveConfigUnavailable(
                f"could not query {LIVE_CONFIG_QUERY} of agent {agent_id!r}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return config
