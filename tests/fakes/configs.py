"""A `ConfigSource` for activity tests that run without an agent workflow."""

from __future__ import annotations

from activities.live_config import LiveConfigUnavailable
from fleet_agent.models import AgentConfig

__all__ = ["StaticConfigs"]


class StaticConfigs:
    """Live configs set by the test; an unknown agent fails like a missing workflow."""

    def __init__(self) -> None:
        self.configs: dict[str, AgentConfig] = {}
        self.queries = 0

    def set(self, agent_id: str, config: AgentConfig) -> None:
        self.configs[agent_id] = config

    async def live_config(self, agent_id: str) -> AgentConfig:
        self.queries += 1
        try:
            return self.configs[agent_id]
        except KeyError:
            raise LiveConfigUnavailable(f"no agent {agent_id!r}") from None
