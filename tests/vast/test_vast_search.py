"""The vast.ai client's offer search against the simulator: filters, units and
order, the CLI's body grammar, pages, storage in the price, the GPU catalogue."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastBadRequest
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from tests.helpers.vast import KEY, sim, vast

__all__ = ["sim", "vast"]  # the fixtures, imported for pytest


async def test_search_filters_units_and_order(vast: VastClient) -> None:
    offers = await vast.search_offers(
        {
            "gpu_name": {"eq": "RTX 4090"},
            "num_gpus": {"eq": 1},
            "cpu_ram": {"gte": 120 * 1024},
            "reliability2": {"gt": 0.8},
        },
        order="dph_total",
    )
    assert offers
    prices = [o.dph_total for o in offers]
    assert prices == sorted(prices)
    for offer in offers:
        assert offer.gpu_name == "RTX 4090" and offer.num_gpus == 1
        # The filter is on the host's RAM, as vast.ai lists it; the rental gets its share.
        assert offer.cpu_ram >= 120 * 1024 and offer.gpu_frac is not None
        assert offer.ram_mb == pytest.approx(offer.cpu_ram * offer.gpu_frac)
        assert 20_000 < offer.gpu_ram < 30_000  # MB, as the service reports
        assert offer.reliability2 is not None and offer.reliability2 > 0.8
        assert offer.rentable is True and offer.geolocation
        assert "score" in offer.extras and "dph_base" in offer.extras


async def test_search_in_notin_and_descending(vast: VastClient) -> None:
    offers = await vast.search_offers(
        {"gpu_name": {"in": ["RTX 3090", "H100 SXM"]}, "geolocation": {"notin": ["CN", "VN"]}},
        order="-dph_total",
        limit=1000,
    )
    assert offers
    assert {o.gpu_name for o in offers} <= {"RTX 3090", "H100 SXM"}
    assert all(not (o.geolocation or "").endswith((", CN", ", VN")) for o in offers)
    prices = [o.dph_total for o in offers]
    assert prices == sorted(prices, reverse=True)


async def test_search_leaves_out_machines_and_hosts_with_notin(vast: VastClient) -> None:
    """As the fleet leaves failed hosts out: ``machine_id`` / ``host_id`` ``notin``."""
    wanted = {"gpu_name": {"in": ["RTX 3090", "RTX 4090"]}}
    offers = await vast.search_offers(wanted, order="dph_total", limit=50)
    machines = [o.machine_id for o in offers[:2] if o.machine_id is not None]
    host = offers[2].host_id
    assert len(machines) == 2 and host is not None
    left = await vast.search_offers(
        {**wanted, "machine_id": {"notin": machines}, "host_id": {"notin": [host]}},
        order="dph_total",
        limit=50,
    )
    assert left
    assert not {o.machine_id for o in left} & set(machines)
    assert host not in {o.host_id for o in left}
    assert {o.id for o in left} >= {o.id for o in offers[3:40]}, "nothing else is left out"


async def test_bid_search_prices_at_min_bid(vast: VastClient) -> None:
    on_demand = {o.id: o for o in await vast.search_offers({}, limit=1000)}
    bids = await vast.search_offers({}, limit=1000, type="bid")
    assert bids
    for bid in bids:
        assert bid.dph_total < on_demand[bid.id].dph_total
        assert bid.extras["is_bid"] is True


async def test_search_rejects_bad_grammar(vast: VastClient) -> None:
    with pytest.raises(ValueError, match="unknown operator"):
        await vast.search_offers({"gpu_name": {"like": "RTX"}})
    with pytest.raises(ValueError, match="needs a list"):
        await vast.search_offers({"gpu_name": {"in": "RTX 4090"}})
    with pytest.raises(VastBadRequest) as info:
        await vast.search_offers({"no_such_field": {"eq": 1}})
    assert info.value.status == 400 and info.value.error == "invalid_args"


async def test_search_body_matches_cli_grammar() -> None:
    """The client's search body is the CLI's: filters at top level, order pairs, type."""
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        assert request.url.path == "/prefix/api/v0/bundles/"
        return httpx.Response(200, json={"offers": []})

    transport = httpx.MockTransport(handler)
    async with VastClient(
        KEY, "https://vast.test/prefix", transport=transport, pacing=NO_PACING
    ) as vast:
        await vast.search_offers(
            {"num_gpus": {"gte": 1}}, order="dph_total,-reliability2", limit=3, type="bid"
        )
    assert seen == [
        {
            "num_gpus": {"gte": 1},
            "order": [["dph_total", "asc"], ["reliability2", "desc"]],
            "type": "bid",
            "limit": 3,
        }
    ]


async def test_paged_search_walks_past_a_full_page(vast: VastClient) -> None:
    """Three offers a page: the pages together are every match, cheapest first,
    each offer once; a bound on the price is kept on every page."""
    # Fewer matches than 100 pages of 3 hold, in a market of hundreds.
    cheap: dict[str, dict[str, Any]] = {
        "dph_total": {"lte": 1.5},
        "gpu_name": {"in": ["RTX 3090", "RTX 4090"]},
    }
    everything = await vast.search_offers(cheap, order="dph_total", limit=1000)
    assert len(everything) > 7
    paged = await vast.search_offers_paged(cheap, page_size=3, max_pages=100, allocated_storage=5)
    assert paged.complete and paged.pages > 2
    assert sorted(o.id for o in paged.offers) == sorted(o.id for o in everything)
    prices = [o.dph_total for o in paged.offers]
    assert prices == sorted(prices) and max(prices) <= 1.5
    cut = await vast.search_offers_paged({"dph_total": {"lte": 1.5}}, page_size=3, max_pages=2)
    assert not cut.complete and cut.pages == 2 and 3 < len(cut.offers) <= 6


async def test_search_price_includes_the_storage_asked_for(vast: VastClient) -> None:
    small = {o.id: o for o in await vast.search_offers({}, limit=1000, allocated_storage=5)}
    large = await vast.search_offers({}, limit=1000, allocated_storage=200)
    assert large and all(o.dph_total > small[o.id].dph_total for o in large)


async def test_gpu_catalogue_is_public_and_cached(sim: SimServer) -> None:
    async with VastClient("any-key-at-all", sim.url, pacing=NO_PACING) as vast:
        names = await vast.gpu_names()
        before = sim.market.counters["requests"]
        assert await vast.gpu_names() == names
        assert sim.market.counters["requests"] == before  # cached
    assert "RTX 4090" in names and "A100 SXM4" in names
