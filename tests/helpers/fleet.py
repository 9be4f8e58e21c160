"""Fleet tool calls for the tests of the fleet activities against the simulator:
an agent id, a tool request for it, the cheapest offer, the simulator's instances."""

from __future__ import annotations

from functools import partial
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import ToolResult
from simulator import SimServer
from tests.helpers import tool_request

AGENT = "fleet-test"


_req = partial(tool_request, AGENT)


async def _cheapest_offer(fleet: FleetActivities, gpu: str = "RTX 4090") -> int:
    env = ActivityEnvironment()
    result: ToolResult = await env.run(
        fleet.search_offers, _req("search_offers", {"gpu_name": gpu})
    )
    assert not result.is_error, result.content
    rows = __import__("json").loads(result.content.split("\n", 1)[1])
    return int(rows[0]["offer_id"])


def _instances(sim: SimServer) -> list[dict[str, Any]]:
    return list(sim.market.state()["instances"])
