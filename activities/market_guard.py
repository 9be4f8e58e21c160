"""The Snark Market's bounds at the fleet tools (fleet_agent/market/fleet_bounds.py):
the create and destroy activities ask here, with the agent's live config,
before they rent or release.

Touches: the store (the agent's latest market point, `fa_market_points`),
only when the config's `market_mode` is "snark"; nothing otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from fleet_agent.market.fleet_bounds import create_bound, destroy_bound
from fleet_agent.market.point import MarketPoint
from fleet_agent.models import AgentConfig
from fleet_agent.store import MarketHistory, Store
from fleet_agent.vast.models import Instance

__all__ = ["MarketGuard"]


class MarketGuard:
    """Reads the latest market point of an agent in market mode."""

    def __init__(self, store: Store) -> None:
        self._history = MarketHistory(store)

    async def _point(self, agent_id: str, config: AgentConfig) -> MarketPoint | None:
        if config.market_mode != "snark":
            return None
        return await asyncio.to_thread(self._history.latest, agent_id)

    async def create_refusal(
        self,
        agent_id: str,
        config: AgentConfig,
        fleet: Sequence[Instance],
        creates_in_flight: int,
        gpus_added: int,
    ) -> str | None:
        """Why a rental of `gpus_added` GPUs is refused by the slots, or None.
        A create in flight whose machine is not listed yet counts as one GPU."""
        point = await self._point(agent_id, config)
        if point is None:
            return None
        gpus = sum(max(1, i.num_gpus or 1) for i in fleet if not i.is_gone)
        return create_bound(point, gpus + creates_in_flight, gpus_added)

    async def destroy_refusal(
        self, agent_id: str, config: AgentConfig, capacity_after_per_h: float, releases: bool
    ) -> str | None:
        """Why a release of capacity is refused until the queue drains, or None."""
        point = await self._point(agent_id, config)
        return destroy_bound(point, capacity_after_per_h, releases)
