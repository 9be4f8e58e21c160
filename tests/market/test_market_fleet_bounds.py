"""The Snark Market's bounds at the fleet tools (fleet_agent/market/fleet_bounds.py,
activities/market_guard.py), through the real create and destroy activities on
the simulator over HTTP: no rental past the node's work slots, and no release
that leaves the open proofs without the capacity to meet their deadline, nor
takes the fleet to zero while the node still asks for work. Off market mode,
the same calls go through."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.market.fleet_bounds import DRAIN_WINDOW_H, create_bound, destroy_bound
from fleet_agent.market.point import ChallengeLedger, MarketPoint
from fleet_agent.models import AgentConfig
from fleet_agent.store import MarketHistory, Store
from simulator.server import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers import tool_request

AGENT = "market-bounds"
_req = partial(tool_request, AGENT)
MARKET = AgentConfig(market_mode="snark", min_release_age_minutes=0, min_fleet_fraction=0)


def _point(challenges: int, **over: Any) -> MarketPoint:
    fields: dict[str, Any] = {
        "at": datetime.now(UTC),
        "enabled": True,
        "ledger": ChallengeLedger(based_on=challenges, challenges=challenges),
        "slots_total": challenges // 50,
    }
    fields.update(over)
    return MarketPoint(**fields)


def test_the_pure_bounds() -> None:
    assert create_bound(None, 100, 8) is None  # no reading yet: the caps alone
    two = _point(100)
    assert create_bound(two, 1, 1) is None
    refused = create_bound(two, 2, 1)
    assert refused is not None and "2 work slot(s) (100 challenge proofs)" in refused
    assert "1 more slot(s) need 50 more challenge proofs" in refused
    assert create_bound(_point(0), 0, 1) is None  # the first GPU earns the first slot
    assert create_bound(_point(0), 1, 1) is not None
    on = _point(500, rows_open=4)
    assert destroy_bound(on, 0, releases_capacity=True) is not None
    assert destroy_bound(on, 0, releases_capacity=False) is None  # a dead machine may go
    assert destroy_bound(on, 4 / DRAIN_WINDOW_H, releases_capacity=True) is None
    short = destroy_bound(on, 4 / DRAIN_WINDOW_H - 1, releases_capacity=True)
    assert short is not None and "turn requests off first" in short
    off = _point(500, enabled=False, rows_open=4)
    assert destroy_bound(off, 0, releases_capacity=True) is not None  # its queue first
    assert destroy_bound(_point(500, enabled=False), 0, releases_capacity=True) is None
    asks = _point(500, enabled=False, asks_open=2)  # an open ask may still be assigned
    assert destroy_bound(asks, 0, releases_capacity=True) is not None


async def _offers(tools: FleetActivities, n: int) -> list[int]:
    found = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"limit": 20, "gpu_name": "RTX 4090"})
    )
    rows: list[dict[str, Any]] = json.loads(found.content.split("\n", 1)[1])
    ones = [int(r["offer_id"]) for r in rows if int(r["num_gpus"]) == 1]
    assert len(ones) >= n, found.content
    return ones[:n]


async def test_slots_bound_the_rentals_and_the_queue_drains_before_the_fleet_goes(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs, store: Store
) -> None:
    env = ActivityEnvironment()
    history = MarketHistory(store)
    configs.config = MARKET
    history.record(AGENT, _point(100, at=datetime.now(UTC) - timedelta(minutes=1)))

    def create(offer: int) -> Any:
        return env.run(
            tools.create_instance, _req("create_instance", {"offer_id": offer, "reason": "r"})
        )

    first, second, third = await _offers(tools, 3)
    assert (await create(first)).mutating
    assert (await create(second)).mutating
    refused = await create(third)
    assert refused.is_error and not refused.mutating, refused.content
    assert "2 work slot(s)" in refused.content and "Nothing was rented" in refused.content
    assert len(sim.market.instance_ids()) == 2
    # Off market mode the slots do not bind.
    configs.config = MARKET.model_copy(update={"market_mode": "off"})
    assert (await create(third)).mutating

    # Requests on: the last machines may not go while the node asks for work.
    configs.config = MARKET
    history.record(AGENT, _point(500, rows_open=0))
    ids = sorted(sim.market.instance_ids())

    def destroy(iid: int) -> Any:
        return env.run(
            tools.destroy_instance, _req("destroy_instance", {"instance_id": iid, "reason": "r"})
        )

    sim.market.advance(3_600)  # proving, so each release is one of capacity
    for iid in ids[:-1]:
        assert (await destroy(iid)).mutating
    last = await destroy(ids[-1])
    assert last.is_error and "turn requests off first" in last.content, last.content
    assert ids[-1] in sim.market.instance_ids()
    # Requests off and the queue drained: it goes.
    history.record(AGENT, _point(500, enabled=False, rows_open=0))
    assert (await destroy(ids[-1])).mutating
