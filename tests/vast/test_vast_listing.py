"""The shared instance listing: one walk for concurrent callers, a TTL, and
no listing begun before a write served after it (fleet_agent/vast/listing.py).
Against a slow fake, and through the real client against the simulator."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.listing import SharedListing
from fleet_agent.vast.models import Instance
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer

KEY = "test-key-listing-0123456789"
IMAGE = "ghcr.io/example/prover:1"
WAIT_S = 5.0  # deadline of every wait below; none is a fixed sleep


class SlowFetch:
    """A walk that waits until released; counts how often it was started."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = asyncio.Event()
        self.fail_next = False

    async def __call__(self) -> list[Instance]:
        self.calls += 1
        n = self.calls
        await self.release.wait()
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("walk failed")
        return [Instance(id=n)]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _until(cond: object, what: str) -> None:
    """Poll `cond()` until true, failing after WAIT_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not cond():  # type: ignore[operator]
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


async def test_concurrent_callers_share_one_walk() -> None:
    fetch = SlowFetch()
    listing = SharedListing(fetch, ttl_s=5, clock=Clock())
    callers = [asyncio.create_task(listing.get()) for _ in range(20)]
    await _until(lambda: fetch.calls == 1, "the walk to start")
    fetch.release.set()
    results = await asyncio.gather(*callers)
    assert fetch.calls == 1
    assert {tuple(i.id for i in r) for r in results} == {(1,)}
    assert (listing.walks, listing.shared) == (1, 19)


async def test_ttl_counts_from_the_walks_end() -> None:
    fetch, clock = SlowFetch(), Clock()
    fetch.release.set()
    listing = SharedListing(fetch, ttl_s=5, clock=clock)
    assert [i.id for i in await listing.get()] == [1]
    clock.now += 4.9
    assert [i.id for i in await listing.get()] == [1]
    clock.now += 0.1
    assert [i.id for i in await listing.get()] == [2]
    assert fetch.calls == 2


async def test_a_long_walk_is_joined_not_repeated() -> None:
    """A walk that outlasts the TTL (many pages behind the pacing) is still
    joined: a second walk would queue behind it and the two would pile up."""
    fetch, clock = SlowFetch(), Clock()
    listing = SharedListing(fetch, ttl_s=5, clock=clock)
    first = asyncio.create_task(listing.get())
    await _until(lambda: fetch.calls == 1, "the walk")
    clock.now += 30
    late = asyncio.create_task(listing.get())
    await asyncio.sleep(0)
    fetch.release.set()
    assert [i.id for i in await first] == [1]
    assert [i.id for i in await late] == [1]
    assert fetch.calls == 1


async def test_a_write_during_a_walk_is_not_hidden_by_it() -> None:
    fetch = SlowFetch()
    listing = SharedListing(fetch, ttl_s=60, clock=Clock())
    before = asyncio.create_task(listing.get())
    await _until(lambda: fetch.calls == 1, "the first walk")
    listing.invalidate()  # a create returned while the first walk was out
    after = asyncio.create_task(listing.get())
    await _until(lambda: fetch.calls == 2, "a second walk")
    fetch.release.set()
    assert [i.id for i in await before] == [1]
    assert [i.id for i in await after] == [2]
    # The newer walk is the one reused.
    assert [i.id for i in await listing.get()] == [2]


async def test_a_failed_walk_is_raised_to_all_and_not_kept() -> None:
    fetch = SlowFetch()
    fetch.fail_next = True
    listing = SharedListing(fetch, ttl_s=60, clock=Clock())
    callers = [asyncio.create_task(listing.get()) for _ in range(3)]
    await _until(lambda: fetch.calls == 1, "the walk")
    fetch.release.set()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    assert [i.id for i in await listing.get()] == [2]


async def test_a_cancelled_caller_leaves_the_walk_to_the_others() -> None:
    fetch = SlowFetch()
    listing = SharedListing(fetch, ttl_s=60, clock=Clock())
    first = asyncio.create_task(listing.get())
    second = asyncio.create_task(listing.get())
    await _until(lambda: fetch.calls == 1, "the walk")
    first.cancel()
    fetch.release.set()
    assert [i.id for i in await second] == [1]
    with pytest.raises(asyncio.CancelledError):
        await first


# ------------------------------------------------- callers that take an older view


async def _walked(listing: SharedListing, fetch: SlowFetch) -> None:
    """One walk, done: the listing has a good result."""
    fetch.release.set()
    await listing.get()
    fetch.release.clear()


async def test_a_stale_ok_caller_is_served_at_once_and_a_newer_walk_starts() -> None:
    fetch, clock = SlowFetch(), Clock()
    listing = SharedListing(fetch, ttl_s=5, stale_s=30, clock=clock)
    await _walked(listing, fetch)
    clock.now += 12  # past the TTL, inside the staleness limit
    rows, stale = await listing.view(stale_ok=True)
    assert ([i.id for i in rows], stale) == ([1], True)
    await _until(lambda: fetch.calls == 2, "a walk started in the background")
    # While it is under way, the next stale caller is served at once too, and
    # no third walk is sent; a caller that needs fresh rows joins the walk.
    rows, stale = await listing.view(stale_ok=True)
    assert ([i.id for i in rows], stale, fetch.calls) == ([1], True, 2)
    fresh = asyncio.create_task(listing.get())
    await asyncio.sleep(0)
    assert not fresh.done()
    fetch.release.set()
    assert [i.id for i in await fresh] == [2]
    rows, stale = await listing.view(stale_ok=True)
    assert ([i.id for i in rows], stale, fetch.calls) == ([2], False, 2)
    assert (listing.walks, listing.stale) == (2, 2)


async def test_past_the_staleness_limit_a_stale_ok_caller_waits_for_a_walk() -> None:
    fetch, clock = SlowFetch(), Clock()
    listing = SharedListing(fetch, ttl_s=5, stale_s=30, clock=clock)
    await _walked(listing, fetch)
    clock.now += 30
    view = asyncio.create_task(listing.view(stale_ok=True))
    await _until(lambda: fetch.calls == 2, "a new walk")
    assert not view.done()
    fetch.release.set()
    rows, stale = await view
    assert ([i.id for i in rows], stale) == ([2], False)


async def test_a_change_after_the_walk_began_is_never_hidden_by_it() -> None:
    """`changed_ago_s` (the journal's last write of the caller's agent, maybe
    made by another worker): a listing begun before it is not served."""
    fetch, clock = SlowFetch(), Clock()
    listing = SharedListing(fetch, ttl_s=5, stale_s=30, clock=clock)
    await _walked(listing, fetch)  # began at 100
    clock.now += 10
    # Changed 4 s ago (at 106): the listing from 100 may miss it.
    view = asyncio.create_task(listing.view(stale_ok=True, changed_ago_s=4))
    await _until(lambda: fetch.calls == 2, "a walk after the change")
    fetch.release.set()
    rows, stale = await view
    assert ([i.id for i in rows], stale) == ([2], False)
    # Changed before the walk that is now the newest began: served from it.
    clock.now += 10
    rows, stale = await listing.view(stale_ok=True, changed_ago_s=15)
    assert ([i.id for i in rows], stale) == ([2], True)
    await _until(lambda: fetch.calls == 3, "a newer walk in the background")


async def test_this_workers_own_write_is_never_hidden_from_a_stale_ok_caller() -> None:
    fetch, clock = SlowFetch(), Clock()
    listing = SharedListing(fetch, ttl_s=5, stale_s=30, clock=clock)
    await _walked(listing, fetch)
    listing.invalidate()
    view = asyncio.create_task(listing.view(stale_ok=True))
    await _until(lambda: fetch.calls == 2, "a walk after the write")
    fetch.release.set()
    rows, _ = await view
    assert [i.id for i in rows] == [2]


async def test_a_failed_background_walk_leaves_the_good_listing_served() -> None:
    fetch, clock = SlowFetch(), Clock()
    listing = SharedListing(fetch, ttl_s=5, stale_s=30, clock=clock)
    await _walked(listing, fetch)
    clock.now += 10
    fetch.fail_next = True
    fetch.release.set()
    rows, stale = await listing.view(stale_ok=True)
    assert ([i.id for i in rows], stale) == ([1], True)
    await _until(
        lambda: fetch.calls == 2 and listing._last is not None and listing._last.task.done(),
        "the failed walk",
    )
    # The failure is nobody's (no caller waited on it); the good rows still serve,
    # and the next stale caller starts another walk.
    rows, stale = await listing.view(stale_ok=True)
    assert ([i.id for i in rows], stale) == ([1], True)
    await _until(lambda: fetch.calls == 3, "another background walk")


async def test_without_a_staleness_limit_or_sharing_nothing_is_served_stale() -> None:
    for ttl_s, stale_s in ((5.0, 0.0), (0.0, 30.0)):
        fetch, clock = SlowFetch(), Clock()
        listing = SharedListing(fetch, ttl_s=ttl_s, stale_s=stale_s, clock=clock)
        await _walked(listing, fetch)
        clock.now += 6
        view = asyncio.create_task(listing.view(stale_ok=True))
        await _until(lambda: fetch.calls == 2, "a walk")  # noqa: B023
        fetch.release.set()
        rows, stale = await view
        assert ([i.id for i in rows], stale) == ([2], False)


# ------------------------------------------------- the client, over HTTP


class CountingTransport(httpx.AsyncBaseTransport):
    """Real HTTP, with the instance-list requests counted."""

    def __init__(self) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self.lists = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path == "/api/v1/instances/":
            self.lists += 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(
        seed=3, speed=0, api_key=KEY, scenario="ideal", offers=300, rate_limits=False
    ) as server:
        yield server


@pytest.fixture
async def counted(sim: SimServer) -> AsyncIterator[tuple[VastClient, CountingTransport]]:
    transport = CountingTransport()
    async with VastClient(
        KEY, sim.url, timeout=5, pacing=NO_PACING, transport=transport, list_ttl_s=60
    ) as client:
        yield client, transport


async def test_client_shares_one_listing_and_sees_its_own_writes(
    counted: tuple[VastClient, CountingTransport],
) -> None:
    vast, transport = counted
    assert await vast.list_instances(shared=True) == []
    assert await vast.list_instances(shared=True) == []
    assert transport.lists == 1  # the second came from the first walk

    offers = await vast.search_offers({"rentable": {"eq": True}}, order="dph_total", limit=1)
    new_id = await vast.create_instance(offers[0].id, image=IMAGE, disk=40, label="fa:x/r1-a")
    mine = await vast.list_instances(label_prefix="fa:x/", shared=True)
    assert [i.id for i in mine] == [new_id]  # walked again: the create invalidated
    assert transport.lists == 2

    await vast.destroy_instance(new_id)
    assert await vast.list_instances(label_prefix="fa:x/", shared=True) == []
    assert transport.lists == 3


async def test_client_walks_once_for_many_concurrent_views(
    counted: tuple[VastClient, CountingTransport],
) -> None:
    vast, transport = counted
    views = await asyncio.gather(
        *(vast.list_instances(label_prefix=f"fa:agent-{i}/", shared=True) for i in range(30))
    )
    assert views == [[]] * 30
    assert transport.lists == 1
    # Unshared and label look-ups still walk on their own.
    await vast.list_instances()
    await vast.list_instances(label="fa:x/r1-a", shared=True)
    assert transport.lists == 3
