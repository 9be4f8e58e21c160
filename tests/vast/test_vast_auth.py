"""The vast.ai client and a rejected or missing key: an auth failure, never a
missing instance or offer; both documented offer-gone shapes."""

from __future__ import annotations

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastAuthError, VastNotFound, VastOfferGone
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from tests.helpers.vast import IMAGE, KEY, sim

__all__ = ["sim"]  # the fixture, imported for pytest


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
