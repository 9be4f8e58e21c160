"""The spend tests' fleet tools against the simulator over HTTP: their agent,
a simulated market at noon (`sim`) and the fleet activities on it (`tools`:
fixtures that override tests/conftest.py's; import them into a test module),
a tool request of the agent (`spend_req`), the first offer the search shows,
a create, the machines left alive, and the offers with the price their host
charges for downloads."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.config.settings import ProverSpec
from fleet_agent.models import ApprovalDecision, ToolResult
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from testkit.sim_helpers import SIM_RAM_GIB, steady_sim
from tests.helpers import tool_request

AGENT = "rules-test"
NOON = datetime(2026, 4, 1, 12, 0, tzinfo=UTC)
spend_req = partial(tool_request, AGENT)


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with steady_sim(13, NOON) as server:
        yield server


@pytest_asyncio.fixture
async def tools(
    sim: SimServer, store: Store, configs: StaticConfigs
) -> AsyncIterator[FleetActivities]:
    async with VastClient(
        sim.api_key, sim.url, timeout=30, backoff_base=0.01, pacing=NO_PACING
    ) as vast:
        yield FleetActivities(
            vast,
            ProverSpec(mode="curio_on_host", min_host_ram_gib=SIM_RAM_GIB),
            store=store,
            configs=configs,
            clock=sim.market.now,
        )


async def first_offer(tools: FleetActivities) -> dict[str, Any]:
    found = await ActivityEnvironment().run(
        tools.search_offers, spend_req("search_offers", {"limit": 1})
    )
    rows: list[dict[str, Any]] = json.loads(found.content.split("\n", 1)[1])
    return rows[0]


async def create_instance(
    tools: FleetActivities, offer_id: int, approval: ApprovalDecision | None = None
) -> ToolResult:
    req = spend_req("create_instance", {"offer_id": offer_id, "reason": "r"})
    if approval is not None:
        req = req.model_copy(update={"approval": approval})
    return await ActivityEnvironment().run(tools.create_instance, req)


def live_instances(sim: SimServer) -> list[int]:
    """The account's machines that are not destroyed."""
    return [int(c["id"]) for c in sim.market.charges()["instances"] if c["ended_at"] is None]


async def search_with_prices(
    tools: FleetActivities, sim: SimServer, limit: int
) -> tuple[list[dict[str, Any]], dict[int, float]]:
    """Offers as search_offers shows them (under the live config), and the
    ``inet_down_cost`` ($/GB) the simulator lists for every offer."""
    found = await ActivityEnvironment().run(
        tools.search_offers, spend_req("search_offers", {"limit": limit})
    )
    rows: list[dict[str, Any]] = json.loads(found.content.split("\n", 1)[1])
    prices = {int(o["id"]): float(o["inet_down_cost"]) for o in sim.market.listed_offers()}
    return rows, prices


async def priced_offers(
    tools: FleetActivities, sim: SimServer
) -> list[tuple[dict[str, Any], float]]:
    """Offers with their download price, the ones that charge for downloads first."""
    rows, prices = await search_with_prices(tools, sim, 30)
    priced = [(r, prices[int(r["offer_id"])]) for r in rows]
    return sorted(priced, key=lambda p: p[1] < 0.004)
