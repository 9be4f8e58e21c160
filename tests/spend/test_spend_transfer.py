"""What a host charges for downloads is capped and counted (issue 51,
finding 5): each rule performed against the real activities and the
simulator over HTTP (a stub where the service must misbehave).

- The search asks for offers under `max_inet_down_cost_per_tb`, and drops
  what the service sends over it anyway.
- The create refuses an offer over the cap.
- Downloads count in `max_fleet_dph` and in the daily budget's projection:
  the offer's, and the fleet's beside the ledger's rate.
- A host that raises its download price between the search and the rental
  has its machine released at once (the simulator's `transfer_price_rise`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.fleet.offer_cost import offer_dph, per_tb
from fleet_agent.models import AgentConfig
from fleet_agent.store import SpendLedger, Store
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from testkit.fakes.vast_stub import StubRequest
from tests.helpers.spend import (
    AGENT,
    create_instance,
    live_instances,
    priced_offers,
    search_with_prices,
    sim,
    spend_req,
    tools,
)
from tests.helpers.vast_rows import CATALOGUE, bundles, market, stub_tools

__all__ = ["sim", "tools"]  # the fixtures, imported for pytest


async def _charging(tools: FleetActivities, sim: SimServer) -> tuple[dict[str, Any], float]:
    """An offer whose host charges at least $4/TB for downloads."""
    row, price = (await priced_offers(tools, sim))[0]
    assert price >= 0.004 and row["transfer_dph"] > 0, (row, price)
    return row, price


# ------------------------------------------------------------ the search


async def test_the_search_asks_for_downloads_under_the_cap_and_drops_what_comes_anyway(
    store: Store,
) -> None:
    rows = market(0, 12)
    for i, row in enumerate(rows):
        row["inet_down_cost"] = round(0.001 * i, 4)  # $0 to $11 a TB

    def ignores_the_price_filter(req: StubRequest) -> tuple[int, Any]:
        if req.path == "/api/v0/gpu_names/unique/":
            return 200, {"gpu_names": CATALOGUE}
        body = {k: v for k, v in req.body.items() if k != "inet_down_cost"}
        return bundles(rows, replace(req, body=body))

    async with stub_tools(store, ignores_the_price_filter) as (tools, stub):
        tools._calls._configs = StaticConfigs(AgentConfig(max_inet_down_cost_per_tb=5))
        found = await ActivityEnvironment().run(
            tools.search_offers, spend_req("search_offers", {"limit": 50})
        )
    (search,) = [r for r in stub.requests if r.path == "/api/v0/bundles/"]
    assert search.body["inet_down_cost"] == {"lte": 0.005}, "$5/TB is $0.005/GB"
    shown = json.loads(found.content.split("\n", 1)[1])
    prices = {r["id"]: r["inet_down_cost"] for r in rows}
    assert sorted(prices[r["offer_id"]] for r in shown) == [0.001 * i for i in range(6)]


async def test_the_simulator_lists_no_offer_over_the_cap(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    configs.config = AgentConfig(max_inet_down_cost_per_tb=3)
    shown, prices = await search_with_prices(tools, sim, 50)
    assert shown and all(prices[r["offer_id"]] <= 0.003 for r in shown)
    assert any(p > 0.003 for p in prices.values()), "the market has dearer hosts"


# ------------------------------------------------------------ the create


async def test_the_create_refuses_an_offer_over_the_download_cap(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    row, price = await _charging(tools, sim)
    # Found under the default cap; the operator lowers it before the create.
    configs.config = AgentConfig(max_inet_down_cost_per_tb=per_tb(price) / 2)
    refused = await create_instance(tools, row["offer_id"])
    assert refused.is_error and not refused.mutating, refused.content
    assert f"downloads cost ${per_tb(price):.2f}/TB, over the" in refused.content
    assert "max_inet_down_cost_per_tb" in refused.content
    assert "Nothing was rented" in refused.content
    assert live_instances(sim) == []


async def test_downloads_count_in_the_fleet_cap(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    row, _ = await _charging(tools, sim)
    # The rental alone fits; with half its downloads' $/h more it would not.
    configs.config = AgentConfig(max_fleet_dph=row["dph"] + row["transfer_dph"] / 2)
    refused = await create_instance(tools, row["offer_id"])
    assert refused.is_error and "fleet spend would be" in refused.content, refused.content
    assert "with downloads" in refused.content and live_instances(sim) == []
    configs.config = AgentConfig(max_fleet_dph=offer_dph(row) * 1.5)
    made = await create_instance(tools, row["offer_id"])
    assert made.mutating and not made.is_error, made.content


async def test_downloads_count_in_the_daily_budget(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    (a, _), (b, _) = (await priced_offers(tools, sim))[:2]
    assert a["transfer_dph"] > 0 and b["transfer_dph"] > 0
    # The offer's own: a day of its rental fits, a day with its downloads does not.
    configs.config = AgentConfig(daily_budget_usd=24 * (a["dph"] + a["transfer_dph"] / 2))
    refused = await create_instance(tools, a["offer_id"])
    assert refused.content.startswith("Refused by the daily budget"), refused.content
    assert live_instances(sim) == []
    configs.config = AgentConfig()
    assert (await create_instance(tools, a["offer_id"])).mutating
    # The fleet's: the ledger bills the machine's rental; its downloads come on top.
    fleet_without_downloads = a["dph"] + offer_dph(b)
    configs.config = AgentConfig(
        daily_budget_usd=24 * (fleet_without_downloads + a["transfer_dph"] / 2)
    )
    refused = await create_instance(tools, b["offer_id"])
    assert refused.content.startswith("Refused by the daily budget"), refused.content
    assert "its downloads and unreadable rows $" in refused.content
    assert len(live_instances(sim)) == 1


# ------------------------------------------------------------ after the rental


async def test_a_host_that_raises_its_download_price_before_the_rental_is_released(
    tools: FleetActivities, sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    row, price = await _charging(tools, sim)
    cap = per_tb(price) * 2
    configs.config = AgentConfig(max_inet_down_cost_per_tb=cap, min_release_age_minutes=0)
    # Rented at ten times the download price its offer listed.
    sim.market.set_faults(transfer_price_rise_next=1, transfer_price_rise_factor=10.0)
    result = await create_instance(tools, row["offer_id"])
    assert sim.market.counters["transfer_price_rises"] == 1
    assert result.is_error and result.mutating, result.content
    assert f"its downloads are billed ${per_tb(price) * 10:.2f}/TB" in result.content
    assert f"over the ${cap:g}/TB cap" in result.content
    assert "destroyed at once" in result.content and "operator is alerted" in result.content
    assert live_instances(sim) == []
    (line,) = SpendLedger(store).instances(AGENT)
    assert line.closed_by == "destroyed"


async def test_a_rental_at_the_listed_download_price_stays(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    row, price = await _charging(tools, sim)
    configs.config = AgentConfig(max_inet_down_cost_per_tb=per_tb(price))
    made = await create_instance(tools, row["offer_id"])
    assert made.mutating and not made.is_error, made.content
    assert len(live_instances(sim)) == 1


async def test_a_zero_cap_rents_only_hosts_that_charge_nothing(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    configs.config = AgentConfig(max_inet_down_cost_per_tb=0)
    shown, prices = await search_with_prices(tools, sim, 50)
    assert shown and all(prices[r["offer_id"]] == 0 and r["transfer_dph"] == 0 for r in shown)
