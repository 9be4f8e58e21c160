"""Fleet changes per hour, enforced at the tool from the journal: a model in a
loop cannot rent or release more than the config allows (simulator over HTTP)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import AgentConfig, ConfigPatch
from simulator.server import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers import tool_request

AGENT = "rates-test"
_req = partial(tool_request, AGENT)


async def _offers(tools: FleetActivities, n: int) -> list[int]:
    found = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"limit": n})
    )
    rows: list[dict[str, Any]] = json.loads(found.content.split("\n", 1)[1])
    assert len(rows) >= n, found.content
    return [int(r["offer_id"]) for r in rows[:n]]


async def test_creates_past_the_hourly_limit_are_refused_and_rent_nothing(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    configs.config = AgentConfig(max_creates_per_hour=2, min_release_age_minutes=0)
    env = ActivityEnvironment()
    offers = await _offers(tools, 4)
    results = [
        await env.run(
            tools.create_instance, _req("create_instance", {"offer_id": o, "reason": "r"})
        )
        for o in offers[:3]
    ]
    assert [r.mutating for r in results] == [True, True, False]
    refused = results[2]
    assert refused.is_error and "max_creates_per_hour=2" in refused.content
    assert (
        "the next one is allowed at" in refused.content and "Nothing was rented" in refused.content
    )
    assert len(sim.market.instance_ids()) == 2
    # Another try within the hour is refused too.
    again = await env.run(
        tools.create_instance, _req("create_instance", {"offer_id": offers[2], "reason": "r"})
    )
    assert not again.mutating and len(sim.market.instance_ids()) == 2
    # Raised by the operator: allowed at once.
    configs.config = AgentConfig(max_creates_per_hour=3, min_release_age_minutes=0)
    more = await env.run(
        tools.create_instance, _req("create_instance", {"offer_id": offers[3], "reason": "r"})
    )
    assert more.mutating, more.content


async def test_releases_past_the_hourly_limit_are_refused_but_dead_machines_may_go(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    env = ActivityEnvironment()
    for offer in await _offers(tools, 3):
        made = await env.run(
            tools.create_instance, _req("create_instance", {"offer_id": offer, "reason": "r"})
        )
        assert made.mutating, made.content
    first, second, third = sorted(sim.market.instance_ids())
    configs.config = AgentConfig(max_destroys_per_hour=1, min_release_age_minutes=0)

    def destroy(iid: int) -> Any:
        return env.run(
            tools.destroy_instance, _req("destroy_instance", {"instance_id": iid, "reason": "r"})
        )

    assert (await destroy(first)).mutating
    refused = await destroy(second)
    assert refused.is_error and "max_destroys_per_hour=1" in refused.content
    assert second in sim.market.instance_ids()
    sim.market.kill(third, "offline")
    gone = await destroy(third)
    assert gone.mutating, "a dead machine is not capacity: its release is never limited"


@pytest.mark.parametrize(
    "raw",
    [
        {"max_creates_per_hour": -1},
        {"max_creates_per_hour": 1.5},
        {"max_destroys_per_hour": "10"},
        {"max_destroys_per_hour": 10_001},
    ],
)
def test_bad_rate_limits_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as err:
        ConfigPatch.model_validate(raw)
    assert next(iter(raw)) in str(err.value)
