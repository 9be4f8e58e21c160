"""Where the vast.ai client connects and with which key: settings from the
environment, plain http only to this machine, a refused connection."""

from __future__ import annotations

import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastConnectionError
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from tests.helpers.vast import IMAGE, KEY, sim

__all__ = ["sim"]  # the fixture, imported for pytest


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
