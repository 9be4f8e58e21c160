"""The vast.ai client's ambiguous failures: a create that may have rented (5xx,
hang, unreadable answer) is marked so and findable; what is not ambiguous."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastNotFound, VastProtocolError, VastServerError, VastTimeout
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from tests.helpers import eventually
from tests.helpers.vast import IMAGE, KEY, _rent_one, sim, vast

__all__ = ["sim", "vast"]  # the fixtures, imported for pytest


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

        # The simulator rents before it hangs, but on a loaded machine the
        # request may not have reached the rent when the client gave up.
        async def rented() -> list[str | None]:
            return [i.label for i in await vast.list_instances(label="fleet-hang-1")]

        assert await eventually(rented, timeout=10, what="the hung create's rental") == [
            "fleet-hang-1"
        ]


async def test_delayed_create_rents_after_the_client_gave_up(sim: SimServer) -> None:
    """The zombie create: slow before it rents, and it rents all the same."""
    sim.market.set_faults(create_delay_next=1, create_delay_seconds=1.5)
    async with VastClient(KEY, sim.url, timeout=0.3, create_timeout=0.3, pacing=NO_PACING) as vast:
        with pytest.raises(VastTimeout) as info:
            await _rent_one(vast, "fleet-zombie-1")
        assert info.value.ambiguous is True
        # On a loaded machine the request may reach the delay only after the
        # client gave up: wait for the delay to begin, then nothing is rented
        # yet (the rent is 1.5 s away).
        await eventually(_delay_began(sim), timeout=10, what="the create's delay")
        assert await vast.list_instances(label="fleet-zombie-1") == []

        async def rented() -> list[str | None]:
            return [i.label for i in await vast.list_instances(label="fleet-zombie-1")]

        assert await eventually(rented, timeout=10, what="the zombie create's rental") == [
            "fleet-zombie-1"
        ]
        assert sim.market.counters["creates"] == 1


def _delay_began(sim: SimServer) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return sim.market.counters["create_delays"] == 1

    return probe


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
            # Stopped while the create waits in its delay (not before it got
            # there: a request still queued when the server stops never runs).
            await eventually(_delay_began(sim), timeout=10, what="the create's delay")
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
