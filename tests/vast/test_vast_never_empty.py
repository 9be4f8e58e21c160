"""The vast.ai client never reads a failed or deprecated instance list as an
empty fleet."""

from __future__ import annotations

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastProtocolError
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from tests.helpers.vast import KEY, _rent_one, sim, vast

__all__ = ["sim", "vast"]  # the fixtures, imported for pytest


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
