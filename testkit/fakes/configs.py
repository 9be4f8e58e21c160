"""A `ConfigSource` for activity tests that run without an agent workflow."""

from __future__ import annotations

from activities.live_config import LiveConfigUnavailable
from fleet_agent.models import AgentConfig

__all__ = ["StaticConfigs"]


class StaticConfigs:
    """The live config every agent has, set by the test. None: the query
    fails, as it does when the agent workflow cannot be reached."""

    def __init__(self, config: AgentConfig | None = None) -> None:
        # Tool tests rent and release a machine within seconds: no minimum
        # age by default (the hysteresis has its own tests, which set it).
        self.config: AgentConfig | None = config or AgentConfig(min_release_age_minutes=0)

    async def live_config(self, agent_id: str) -> AgentConfig:
        if self.config is None:
            raise LiveConfigUnavailable(f"agent {agent_id!r} cannot be reached")
        return self.config
