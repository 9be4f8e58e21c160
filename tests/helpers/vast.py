"""The vast.ai client against a small simulated market: the key, the image, the
simulator and client fixtures, and renting one machine. Import the fixtures
into a test module (they override tests/conftest.py's `sim`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer

KEY = "test-key-0123456789abcdef"
IMAGE = "ghcr.io/example/prover:1"
START = 1_750_000_000.0


def small_market(seed: int = 7, scenario: str = "ideal") -> SimServer:
    """A small market without pacing: neither is the point of these tests."""
    return SimServer(
        seed=seed,
        speed=0,
        api_key=KEY,
        scenario=scenario,
        start_epoch=START,
        offers=500,
        rate_limits=False,
    )


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with small_market() as server:
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
