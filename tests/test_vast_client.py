"""The vast.ai client against the simulator: every endpoint, error shape and fault."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import (
    VastAuthError,
    VastBadRequest,
    VastConnectionError,
    VastNotFound,
    VastOfferGone,
    VastProtocolError,
    VastRateLimited,
    VastServerError,
    VastTimeout,
)
from fleet_agent.vast.models import TERMINAL_STATUSES, Instance
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer, proofs_per_hour

KEY = "test-key-0123456789abcdef"
IMAGE = "ghcr.io/example/prover:1"
START = 1_750_000_000.0


@pytest.fixture
def sim() -> Iterator[SimServer]:
    # A small market without pacing: neither is the point of these tests.
    with SimServer(
        seed=7,
        speed=0,
        api_key=KEY,
        scenario="ideal",
        start_epoch=START,
        offers=500,
        rate_limits=False,
    ) as server:
        yield server


@pytest.fixture
async def vast(sim: SimServer) -> AsyncIterator[VastClient]:
    async with VastClient(KEY, sim.url, timeout=5, backoff_base=0.01, pacing=NO_PACING) as client:
        yield client


async def _rent_one(vast: VastClient, label: str, **filters: dict[str, object]) -> int:
    offers = await vast.search_offers(
        {"rentable": {"eq": True}, "disk_space": {"gte": 50}, **filters},
        order="dph_total",
        limit=5,
    )
    assert offers, "the simulated market should have an offer"
    return await vast.create_instance(offers[0].id, image=IMAGE, disk=40, label=label)


# ------------------------------------------------------------------ search


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


# ------------------------------------------------------- create/show/destroy


async def test_create_show_list_destroy_round_trip(vast: VastClient, sim: SimServer) -> None:
    offer = (await vast.search_offers({"gpu_name": {"eq": "RTX 3090"}}, order="dph_total"))[0]
    instance_id = await vast.create_instance(
        offer.id,
        image=IMAGE,
        disk=30,
        label="fleet-rt-1",
        onstart="echo hi",
        env={"ROLE": "prover", "-p 8080:8080": "1"},
    )
    shown = await vast.show_instance(instance_id)
    assert shown is not None
    assert shown.id == instance_id and shown.label == "fleet-rt-1"
    assert shown.actual_status is None and shown.is_booting and not shown.is_running
    assert shown.intended_status == "running" and shown.cur_state == "running"
    assert shown.machine_id == offer.machine_id and shown.gpu_name == "RTX 3090"
    assert shown.image_uuid == IMAGE and shown.disk_space == 30
    assert shown.start_date == pytest.approx(START)
    assert shown.extras["extra_env"] == [["ROLE", "prover"], ["-p 8080:8080", "1"]]
    assert "proofs_per_hour" not in shown.extras  # the service reports no proving figures

    listed = await vast.list_instances()
    assert [i.id for i in listed] == [instance_id]
    assert offer.id not in sim.market.offer_ids()  # rented offers leave the market

    await vast.destroy_instance(instance_id)
    assert await vast.show_instance(instance_id) is None
    assert await vast.list_instances() == []
    await vast.destroy_instance(instance_id)  # already gone: fine by default
    with pytest.raises(VastNotFound):
        await vast.destroy_instance(instance_id, missing_ok=False)


async def test_rented_offer_is_gone_410_no_such_ask(vast: VastClient) -> None:
    offer = (await vast.search_offers({}, limit=1))[0]
    await vast.create_instance(offer.id, image=IMAGE, disk=10, label="a")
    with pytest.raises(VastOfferGone) as info:
        await vast.create_instance(offer.id, image=IMAGE, disk=10, label="b")
    assert info.value.status == 410 and info.value.error == "no_such_ask"
    assert info.value.ambiguous is False and info.value.permanent is True


async def test_offer_taken_between_search_and_rent(vast: VastClient, sim: SimServer) -> None:
    offer = (await vast.search_offers({}, limit=1))[0]
    sim.market.set_faults(offer_taken_next=1)
    with pytest.raises(VastOfferGone) as info:
        await vast.create_instance(offer.id, image=IMAGE, disk=10, label="taken")
    assert info.value.error == "no_such_ask" and not info.value.ambiguous
    assert offer.id not in [o.id for o in await vast.search_offers({}, limit=1000)]
    assert await vast.list_instances() == []


async def test_bid_create_checks_min_bid(vast: VastClient) -> None:
    offer = (await vast.search_offers({"disk_space": {"gte": 50}}, limit=1))[0]
    assert offer.min_bid is not None
    with pytest.raises(VastBadRequest):
        await vast.create_instance(
            offer.id, image=IMAGE, disk=10, label="cheap", price=offer.min_bid / 2
        )
    instance_id = await vast.create_instance(
        offer.id, image=IMAGE, disk=10, label="bid", price=offer.min_bid
    )
    shown = await vast.show_instance(instance_id)
    assert shown is not None and shown.extras["is_bid"] is True
    assert shown.dph_total == pytest.approx(offer.min_bid, abs=0.01)


async def test_show_of_unknown_instance_is_none(vast: VastClient) -> None:
    assert await vast.show_instance(1) is None


# ------------------------------------------------------------------- auth


async def test_search_with_a_wrong_key_is_an_auth_failure_not_not_found(sim: SimServer) -> None:
    """The search answers a bad key with 404 "Invalid user key": permanent, and
    never read as "not found"."""
    async with VastClient("wrong-key-abcdef", sim.url, pacing=NO_PACING) as bad:
        with pytest.raises(VastAuthError) as info:
            await bad.search_offers({}, limit=1)
    err = info.value
    assert not isinstance(err, VastNotFound)
    assert err.status == 404 and err.msg == "Invalid user key" and err.permanent
    assert "wrong-key-abcdef" not in f"{err} {err!r}"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, {"error": "auth_error", "msg": "Invalid user key"}),
        (404, {"msg": "Invalid user key"}),
        (200, {"success": False, "msg": "Invalid user key"}),
        (403, {"success": False, "error": "forbidden", "msg": "no permission"}),
    ],
)
async def test_a_rejected_key_is_never_a_missing_instance(
    status: int, body: dict[str, object]
) -> None:
    """Show and destroy treat "no such instance" as gone; a rejected key must
    not be taken for it, or a destroy would report success."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body)

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        for call in (vast.show_instance(5), vast.destroy_instance(5), vast.list_instances()):
            with pytest.raises(VastAuthError):
                await call


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            410,
            {
                "success": False,
                "error": "no_such_ask",
                "msg": "error 410/3907: no_such_ask Instance type 7 is no longer available.",
                "ask_id": 7,
            },
        ),
        (
            404,
            {
                "success": False,
                "error": "invalid_args",
                "msg": "error 404/3603: no_such_ask Instance type by id 7 is not available.",
                "ask_id": 7,
            },
        ),
    ],
)
async def test_both_documented_offer_gone_shapes(status: int, body: dict[str, object]) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body)

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        with pytest.raises(VastOfferGone) as info:
            await vast.create_instance(7, image=IMAGE, disk=10, label="x")
    assert info.value.status == status and not info.value.ambiguous and info.value.permanent


async def test_wrong_or_missing_key_is_401(sim: SimServer) -> None:
    async with VastClient("wrong-key-abcdef", sim.url, pacing=NO_PACING) as bad:
        with pytest.raises(VastAuthError) as info:
            await bad.list_instances()
    err = info.value
    assert err.status == 401 and err.error == "auth_error"
    assert "wrong-key-abcdef" not in f"{err} {err!r} {bad!r}"

    async with httpx.AsyncClient(base_url=sim.url) as raw:
        missing = await raw.get("/api/v1/instances/")
        legacy = await raw.get("/api/v1/instances/", params={"api_key": KEY})
    assert missing.status_code == 401
    assert missing.json() == {
        "success": False,
        "error": "auth_error",
        "msg": "Please log in or sign up",
    }
    assert legacy.status_code == 200 and legacy.json()["success"] is True


async def test_client_settings_from_environment(
    sim: SimServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VAST_API_KEY", KEY)
    monkeypatch.setenv("VAST_API_URL", sim.url + "/")
    async with VastClient(pacing=NO_PACING) as vast:
        assert vast.base_url == sim.url
        assert KEY not in repr(vast)
        assert await vast.list_instances() == []
    monkeypatch.delenv("VAST_API_KEY")
    with pytest.raises(ValueError, match="API key"):
        VastClient(pacing=NO_PACING)
    with pytest.raises(ValueError, match="origin only"):
        VastClient(KEY, sim.url + "/api/v0", pacing=NO_PACING)
    # The key travels in every request: plain http only to this machine.
    with pytest.raises(ValueError, match="must be https unless it points at this machine"):
        VastClient(KEY, "http://console.vast.ai", pacing=NO_PACING)
    monkeypatch.setenv("VAST_API_URL", "http://10.0.0.5:8080")
    with pytest.raises(ValueError, match="in the clear"):
        VastClient(KEY, pacing=NO_PACING)
    async with VastClient(KEY, sim.url, pacing=NO_PACING) as vast:
        with pytest.raises(ValueError, match="path"):
            await vast.raw_request("GET", "http://elsewhere.test/api/v0/instances/")


async def test_refused_connection_is_not_ambiguous() -> None:
    with SimServer(seed=1, speed=0, api_key=KEY, offers=10) as gone:
        url = gone.url
    async with VastClient(KEY, url, timeout=2, pacing=NO_PACING) as vast:
        with pytest.raises(VastConnectionError) as info:
            await vast.create_instance(1, image=IMAGE, disk=10, label="nobody-home")
    assert info.value.ambiguous is False


# ------------------------------------------------------------ rate limits


async def test_429_burst_is_retried(vast: VastClient, sim: SimServer) -> None:
    sim.market.set_faults(rate_limit_next=3)
    offers = await vast.search_offers({}, limit=3)
    assert len(offers) == 3
    assert sim.market.counters["rate_limited"] == 3


async def test_429_is_plain_text_without_retry_after(sim: SimServer) -> None:
    sim.market.set_faults(rate_limit_next=1)
    async with httpx.AsyncClient(base_url=sim.url) as raw:
        resp = await raw.get("/api/v1/instances/", headers={"Authorization": f"Bearer {KEY}"})
    assert resp.status_code == 429
    assert resp.headers["content-type"].startswith("text/plain")
    assert "Retry-After" not in resp.headers
    assert resp.text == "API requests too frequent"


async def test_429_exhausted_raises(sim: SimServer) -> None:
    sim.market.set_faults(rate_limit_next=10)
    async with VastClient(
        KEY, sim.url, max_429_retries=2, backoff_base=0.01, pacing=NO_PACING
    ) as vast:
        with pytest.raises(VastRateLimited) as info:
            await vast.list_instances()
    assert info.value.status == 429 and "too frequent" in str(info.value)
    assert sim.market.counters["rate_limited"] == 3  # first try + 2 retries


async def test_min_interval_rate_limit_is_per_endpoint(sim: SimServer) -> None:
    sim.market.set_faults(min_interval_s=30.0)
    async with VastClient(KEY, sim.url, max_429_retries=0, pacing=NO_PACING) as vast:
        await vast.list_instances()
        await vast.search_offers({}, limit=1)  # another endpoint: its own budget
        with pytest.raises(VastRateLimited):
            await vast.list_instances()


# ---------------------------------------------------- ambiguous failures


async def test_create_5xx_after_rent_is_ambiguous_and_findable(
    vast: VastClient, sim: SimServer
) -> None:
    sim.market.set_faults(create_error_next=1)
    with pytest.raises(VastServerError) as info:
        await _rent_one(vast, "fleet-5xx-1")
    assert info.value.status == 500 and info.value.ambiguous is True
    # The machine was rented: reconciling by label finds it.
    found = await vast.list_instances(label="fleet-5xx-1")
    assert len(found) == 1 and found[0].label == "fleet-5xx-1"


async def test_create_that_hangs_times_out_ambiguous(sim: SimServer) -> None:
    sim.market.set_faults(create_hang_next=1, hang_seconds=30.0)
    async with VastClient(KEY, sim.url, timeout=0.5, create_timeout=0.5, pacing=NO_PACING) as vast:
        with pytest.raises(VastTimeout) as info:
            await _rent_one(vast, "fleet-hang-1")
        assert info.value.ambiguous is True
        assert [i.label for i in await vast.list_instances(label="fleet-hang-1")] == [
            "fleet-hang-1"
        ]


async def test_delayed_create_rents_after_the_client_gave_up(sim: SimServer) -> None:
    """The zombie create: slow before it rents, and it rents all the same."""
    sim.market.set_faults(create_delay_next=1, create_delay_seconds=1.5)
    async with VastClient(KEY, sim.url, timeout=0.3, create_timeout=0.3, pacing=NO_PACING) as vast:
        with pytest.raises(VastTimeout) as info:
            await _rent_one(vast, "fleet-zombie-1")
        assert info.value.ambiguous is True
        # Nothing yet: the request is still waiting before the rent.
        assert await vast.list_instances(label="fleet-zombie-1") == []
        assert sim.market.counters["create_delays"] == 1
        for _ in range(100):
            found = await vast.list_instances(label="fleet-zombie-1")
            if found:
                break
            await asyncio.sleep(0.05)
        assert [i.label for i in found] == ["fleet-zombie-1"]
        assert sim.market.counters["creates"] == 1


async def test_delayed_create_of_a_stopping_server_rents_nothing() -> None:
    with SimServer(
        seed=7, speed=0, api_key=KEY, scenario="ideal", offers=500, rate_limits=False
    ) as sim:
        market = sim.market
        market.set_faults(create_delay_next=1, create_delay_seconds=30.0)
        async with VastClient(
            KEY, sim.url, timeout=0.3, create_timeout=0.3, pacing=NO_PACING
        ) as vast:
            with pytest.raises(VastTimeout):
                await _rent_one(vast, "fleet-zombie-2")
    assert market.counters["create_delays"] == 1
    assert market.counters["creates"] == 0 and market.instance_ids() == []


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, {"success": False, "error": "not_found", "msg": "Instance not found"}),
        (404, {"success": False, "error": "no_such_instance", "msg": "Instance 5 not found."}),
        (200, {"success": False, "error": "no_such_instance", "msg": "Instance 5 not found."}),
        (404, {"success": False, "msg": "Instance 5 not found."}),
    ],
)
async def test_missing_instance_shapes_count_as_gone(status: int, body: dict[str, object]) -> None:
    """Every way the service says "no such instance" is gone, for show and destroy."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body)

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        assert await vast.show_instance(5) is None
        await vast.destroy_instance(5)
        with pytest.raises(VastNotFound):
            await vast.destroy_instance(5, missing_ok=False)


async def test_bare_404_is_not_taken_for_a_missing_instance() -> None:
    """A 404 without the service's JSON may be a proxy or a wrong URL."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, text="Not Found")

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        with pytest.raises(VastNotFound):
            await vast.show_instance(5)
        with pytest.raises(VastNotFound):
            await vast.destroy_instance(5)


async def test_read_timeout_on_a_get_is_not_ambiguous() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        with pytest.raises(VastTimeout) as info:
            await vast.show_instance(5)
    assert info.value.ambiguous is False


async def test_unreadable_create_answer_is_ambiguous() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>oops</html>")

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        with pytest.raises(VastProtocolError) as info:
            await vast.create_instance(1, image=IMAGE, disk=10, label="x")
    assert info.value.ambiguous is True


# --------------------------------------------------- never an empty fleet


async def test_success_false_list_is_an_error(vast: VastClient, sim: SimServer) -> None:
    await _rent_one(vast, "fleet-sf-1")
    sim.market.set_faults(list_error_next=1)
    with pytest.raises(VastProtocolError) as info:
        await vast.list_instances()
    assert info.value.error == "server_error"
    assert len(await vast.list_instances()) == 1


async def test_deprecated_v0_list_is_never_empty(vast: VastClient) -> None:
    with pytest.raises(VastProtocolError) as info:
        await vast.raw_request("GET", "/api/v0/instances/")
    assert info.value.status == 410 and info.value.error == "deprecated_endpoint"


async def test_deprecated_answer_on_any_list_path_raises() -> None:
    """Even a 200 carrying ``deprecated_endpoint`` is an error, not zero instances."""
    body = {
        "success": False,
        "error": "deprecated_endpoint",
        "msg": "/api/v0/instances/ is deprecated. Use /api/v1/instances/ instead.",
    }

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body)

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        with pytest.raises(VastProtocolError) as info:
            await vast.list_instances()
    assert info.value.error == "deprecated_endpoint"


async def test_list_without_instances_key_raises() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"success": True})

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        with pytest.raises(VastProtocolError):
            await vast.list_instances()


# -------------------------------------------------------------- pagination


async def test_pagination_walks_every_page(vast: VastClient, sim: SimServer) -> None:
    rentable = {"rentable": {"eq": True}, "rented": {"eq": False}}
    offers = await vast.search_offers(rentable, order="dph_total", limit=40)
    for n, offer in enumerate(offers[:32]):
        label = f"fleet-pg-{n:02d}" if n < 30 else f"other-{n}"
        await vast.create_instance(offer.id, image=IMAGE, disk=8, label=label)

    async with httpx.AsyncClient(base_url=sim.url) as raw:
        first = (
            await raw.get("/api/v1/instances/", headers={"Authorization": f"Bearer {KEY}"})
        ).json()
    assert len(first["instances"]) == 25 and first["total_instances"] == 32
    assert isinstance(first["next_token"], str) and first["next_token"]

    before = sim.market.counters["requests"]
    everything = await vast.list_instances()
    assert sim.market.counters["requests"] - before == 2
    assert len(everything) == 32 and len({i.id for i in everything}) == 32

    small_pages = await vast.list_instances(page_size=7)
    assert [i.id for i in small_pages] == [i.id for i in everything]

    ours = await vast.list_instances(label_prefix="fleet-pg-")
    assert sorted(i.label or "" for i in ours) == [f"fleet-pg-{n:02d}" for n in range(30)]


async def test_concurrent_creates_are_consistent(vast: VastClient, sim: SimServer) -> None:
    rentable = {"rentable": {"eq": True}, "rented": {"eq": False}}
    offers = await vast.search_offers(rentable, order="dph_total", limit=20)
    made = await asyncio.gather(
        *(
            vast.create_instance(o.id, image=IMAGE, disk=8, label=f"fleet-cc-{n}")
            for n, o in enumerate(offers)
        )
    )
    assert len(set(made)) == len(offers) == 20
    assert sorted(i.id for i in await vast.list_instances()) == sorted(made)
    assert not set(o.id for o in offers) & set(sim.market.offer_ids())


async def test_label_filter(vast: VastClient) -> None:
    await _rent_one(vast, "fleet-a")
    await _rent_one(vast, "fleet-b")
    only_a = await vast.list_instances(label="fleet-a")
    assert [i.label for i in only_a] == ["fleet-a"]
    assert await vast.list_instances(label="fleet-none") == []


# --------------------------------------------------------------- lifecycle


async def _status(vast: VastClient, instance_id: int) -> Instance:
    shown = await vast.show_instance(instance_id)
    assert shown is not None
    return shown


async def test_lifecycle_null_loading_running(vast: VastClient, sim: SimServer) -> None:
    instance_id = await _rent_one(vast, "fleet-life-1")
    assert (await _status(vast, instance_id)).actual_status is None
    sim.market.advance(41)  # provisioning takes at most 40 s
    loading = await _status(vast, instance_id)
    assert loading.actual_status == "loading"
    sim.market.advance(3600)  # image pulls take minutes, not an hour
    running = await _status(vast, instance_id)
    assert running.is_running and running.status_msg and "success" in running.status_msg
    # Like the real service's, rows say nothing about proving (the prover's
    # status port does: tests/test_sim_prover.py).
    assert "proofs_per_hour" not in running.extras


async def test_dying_instance_never_comes_back(vast: VastClient, sim: SimServer) -> None:
    sim.market.set_faults(die_next=1, die_after_s=300)
    instance_id = await _rent_one(vast, "fleet-die-1")
    sim.market.advance(3600)
    dead = await _status(vast, instance_id)
    assert dead.actual_status in TERMINAL_STATUSES and dead.is_terminal
    for _ in range(5):
        sim.market.advance(6 * 3600)
        again = await _status(vast, instance_id)
        assert again.actual_status == dead.actual_status


async def test_killed_instance_stays_dead(vast: VastClient, sim: SimServer) -> None:
    instance_id = await _rent_one(vast, "fleet-kill-1")
    sim.market.advance(3600)
    assert (await _status(vast, instance_id)).is_running
    async with httpx.AsyncClient(base_url=sim.url) as raw:
        resp = await raw.post(f"/_sim/kill/{instance_id}", json={"status": "offline"})
    assert resp.status_code == 200
    sim.market.advance(24 * 3600)
    assert (await _status(vast, instance_id)).actual_status == "offline"


async def test_stuck_and_failed_boots(vast: VastClient, sim: SimServer) -> None:
    sim.market.set_faults(stuck_loading_next=1)
    stuck = await _rent_one(vast, "fleet-stuck-1")
    sim.market.set_faults(boot_fail_next=1)
    failed = await _rent_one(vast, "fleet-fail-1")
    sim.market.advance(10 * 3600)
    assert (await _status(vast, stuck)).actual_status == "loading"
    assert (await _status(vast, failed)).actual_status in ("exited", "offline", "created")


# ---------------------------------------------------- market and control


async def test_seed_reproducibility() -> None:
    Run = tuple[list[tuple[int, float]], list[str], list[tuple[int, str | None]]]

    async def run(seed: int) -> Run:
        with SimServer(
            seed=seed,
            speed=0,
            api_key=KEY,
            scenario="chaos",
            start_epoch=START,
            offers=500,
            rate_limits=False,
        ) as s:
            s.market.set_faults(create_hang_rate=0.0)  # keep the test fast
            async with VastClient(
                KEY, s.url, backoff_base=0, max_429_retries=20, pacing=NO_PACING
            ) as vast:
                offers = await vast.search_offers({}, order="dph_total", limit=20)
                outcomes = []
                for n, offer in enumerate(offers[:8]):
                    try:
                        made = await vast.create_instance(
                            offer.id, image=IMAGE, disk=8, label=f"r{n}"
                        )
                        outcomes.append(str(made))
                    except (VastNotFound, VastServerError) as exc:
                        outcomes.append(type(exc).__name__)
                s.market.advance(2 * 3600)
                statuses = [(i.id, i.actual_status) for i in await vast.list_instances()]
                return [(o.id, o.dph_total) for o in offers], outcomes, statuses

    first, second, other = await run(123), await run(123), await run(124)
    assert first == second
    assert first[0] != other[0]
    # chaos rolls its faults from the seed too: same failures, same fates.
    assert len({s for _, s in first[2]}) > 1 or any(not o.isdigit() for o in first[1])


async def test_market_churn(sim: SimServer) -> None:
    before = set(sim.market.offer_ids())
    sim.market.advance(4 * 3600)
    after = set(sim.market.offer_ids())
    assert after - before and before - after
    assert 300 <= len(after) <= 700  # arrivals balance departures around the 500 listed


async def test_control_api(sim: SimServer) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as raw:
        state = (await raw.get("/_sim/state")).json()
        assert state["seed"] == 7 and state["offers"] > 0 and state["instances"] == []
        moved = (await raw.post("/_sim/advance", json={"seconds": 60})).json()
        assert moved["now"] == pytest.approx(state["now"] + 60)
        ok = await raw.post("/_sim/faults", json={"scenario": "chaos", "rate_limit_rate": 0})
        assert ok.status_code == 200 and ok.json()["faults"]["boot_fail_rate"] > 0
        bad = await raw.post("/_sim/faults", json={"no_such_fault": 1})
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_args"
        gone = await raw.post("/_sim/kill/1", json={})
        assert gone.status_code == 404
        unknown = await raw.get("/api/v0/nothing/here/", params={"api_key": KEY})
        assert unknown.status_code == 404 and unknown.text == "Not Found"
    assert sim.market.scenario == "chaos"


def test_capacity_model_matches_published_figures() -> None:
    # ~140 s per proof on a 3090/4090 -> ~25 proofs/h on the baseline engine.
    for gpu in ("RTX 3090", "RTX 4090"):
        assert 23 <= proofs_per_hour(gpu, 1, 128 * 1024 * 0.98) <= 28
        # cuzk with more host RAM does better, and never worse.
        assert proofs_per_hour(gpu, 1, 256 * 1024 * 0.98) > 35
        assert proofs_per_hour(gpu, 1, 512 * 1024) > proofs_per_hour(gpu, 1, 256 * 1024)
    assert proofs_per_hour("RTX 3090", 1, 32 * 1024) == 0  # the SRS alone does not fit
    assert proofs_per_hour("H100 SXM", 8, 2048 * 1024) > 8 * 25


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


async def test_create_body_keeps_the_images_entrypoint_and_maps_a_port() -> None:
    """runtype "args" keeps the image's ENTRYPOINT; args replace its CMD; a port
    mapping travels in env as the CLI's ``-p`` key (docs: creating instances)."""
    seen: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json={"success": True, "new_contract": 77})

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        made = await vast.create_instance(
            5,
            image=IMAGE,
            disk=64,
            label="L",
            runtype="args",
            args=["--status-port", "9100"],
            env={"-p 9100:9100": "1", "PROVER_STATUS_PORT": "9100"},
        )
        await vast.create_instance(6, image=IMAGE, disk=64, label="M")
    assert made == 77
    assert seen[0] == {
        "client_id": "me",
        "image": IMAGE,
        "disk": 64.0,
        "label": "L",
        "onstart": None,
        "env": {"-p 9100:9100": "1", "PROVER_STATUS_PORT": "9100"},
        "runtype": "args",
        "args": ["--status-port", "9100"],
    }
    # Without a runtype the service's default applies; nothing is invented.
    assert "runtype" not in seen[1] and "args" not in seen[1]


async def test_create_records_runtype_and_port_in_the_simulator(vast: VastClient) -> None:
    offer = (await vast.search_offers({"disk_space": {"gte": 64}}, limit=1))[0]
    made = await vast.create_instance(
        offer.id, image=IMAGE, disk=64, label="rt", runtype="args", env={"-p 9100:9100": "1"}
    )
    shown = await vast.show_instance(made)
    assert shown is not None and ["-p 9100:9100", "1"] in shown.extras["extra_env"]
    assert shown.extras["image_runtype"] == "args"


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


async def test_list_leaves_out_destroyed_rows() -> None:
    rows = [
        {"id": 1, "label": "a", "actual_status": "running", "cur_state": "running"},
        {"id": 2, "label": "a", "actual_status": "exited", "cur_state": "unloaded"},
        {"id": 3, "label": "a", "actual_status": None, "intended_status": "destroyed"},
        {"id": 4, "label": "a", "actual_status": "stopped", "cur_state": "stopped"},
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"instances": rows, "next_token": None})

    transport = httpx.MockTransport(handler)
    async with VastClient(KEY, "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        assert [i.id for i in await vast.list_instances()] == [1, 4]
        assert [i.id for i in await vast.list_instances(include_gone=True)] == [1, 2, 3, 4]
