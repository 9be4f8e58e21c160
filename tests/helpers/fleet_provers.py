"""The simulator's machines rented for the tests that read their provers'
status over HTTP (tests/fleet/test_fleet_provers.py and the digest's proof
count): the agent that rents them, and `rent`, which rents `n` machines of
different kinds through the fleet tools."""

from __future__ import annotations

import json
from functools import partial

from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import ToolResult
from tests.helpers import tool_request

AGENT = "fleet-agent"


_req = partial(tool_request, AGENT)


async def rent(tools: FleetActivities, n: int) -> list[int]:
    env = ActivityEnvironment()
    found: ToolResult = await env.run(tools.search_offers, _req("search_offers", {"limit": 20}))
    rows = json.loads(found.content.split("\n", 1)[1])
    # Different machines, so the rates differ.
    picked, seen = [], set()
    for row in rows:
        if (row["gpu"], row["num_gpus"]) not in seen:
            seen.add((row["gpu"], row["num_gpus"]))
            picked.append(row["offer_id"])
    for offer in picked[:n]:
        made = await env.run(
            tools.create_instance, _req("create_instance", {"offer_id": offer, "reason": "t"})
        )
        assert made.mutating, made.content
    return picked[:n]
