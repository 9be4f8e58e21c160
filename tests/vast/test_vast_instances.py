"""The vast.ai client's instances against the simulator: create, show, list
(paginated, by label, without destroyed rows) and destroy; the create body."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastBadRequest, VastNotFound, VastOfferGone
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from tests.helpers.vast import IMAGE, KEY, START, _rent_one, sim, vast

__all__ = ["sim", "vast"]  # the fixtures, imported for pytest


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
