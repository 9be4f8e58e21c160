"""The vast.ai client and the service's 429s: retried after a burst, with or
without Retry-After, given up after too many; limits per endpoint."""

from __future__ import annotations

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastRateLimited
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from tests.helpers.vast import KEY, sim, vast

__all__ = ["sim", "vast"]  # the fixtures, imported for pytest


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
