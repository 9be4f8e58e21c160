"""Client-side pacing: the order and spacing of requests the limiter enforces.

Virtual time for the rules (no waiting), then real requests to a local HTTP
stub with the documented limits scaled down, checking the spacing of their
arrivals from below only (a slow machine spaces them more, never less).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastRateLimited
from fleet_agent.vast.pacing import DOCUMENTED, NO_PACING, Pacer, endpoint_of
from testkit.fakes.vast_stub import StubRequest, VastStub, instances_page

KEY = "pacing-key-0123456789"


class VirtualTime:
    """A clock and a sleep for the pacer: sleepers wake in time order as
    `run` advances the clock, so concurrent callers interleave as they would."""

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._seq), fut))
        await fut

    async def run(self, *coros: object) -> list[object]:
        tasks = [asyncio.ensure_future(c) for c in coros]  # type: ignore[call-overload]
        while not all(t.done() for t in tasks):
            for _ in range(20):
                await asyncio.sleep(0)
            if self._sleepers and not all(t.done() for t in tasks):
                wake, _, fut = heapq.heappop(self._sleepers)
                self.now = max(self.now, wake)
                fut.set_result(None)
        return [t.result() for t in tasks]


def _pacer(vt: VirtualTime) -> Pacer:
    return Pacer(DOCUMENTED, clock=vt.clock, sleep=vt.sleep, rng=random.Random(1))


def test_requests_belong_to_the_documented_endpoints() -> None:
    assert endpoint_of("POST", "/api/v0/bundles/")[0] == "search"
    assert endpoint_of("PUT", "/api/v0/asks/123/")[0] == "create"
    assert endpoint_of("GET", "/api/v1/instances/")[0] == "list"
    assert endpoint_of("GET", "/api/v0/instances/42")[0] == "show"
    assert endpoint_of("DELETE", "/api/v0/instances/42/")[0] == "destroy"
    assert endpoint_of("GET", "/api/v0/gpu_names/unique/")[0] == "catalogue"
    assert endpoint_of("GET", "/api/v0/users/7/") == ("other", "GET /api/v0/users/{id}/")


async def test_each_endpoint_keeps_its_interval_in_the_order_asked() -> None:
    vt = VirtualTime()
    pacer = _pacer(vt)
    slots: list[tuple[str, float]] = []

    async def call(method: str, path: str, name: str) -> None:
        await pacer.wait(method, path)
        slots.append((name, vt.now))

    await vt.run(
        *(call("PUT", f"/api/v0/asks/{n}/", f"create{n}") for n in range(3)),
        *(call("GET", "/api/v1/instances/", f"list{n}") for n in range(3)),
        call("GET", "/api/v0/instances/5/", "show"),
        call("DELETE", "/api/v0/instances/5/", "destroy0"),
        call("DELETE", "/api/v0/instances/6/", "destroy1"),
    )
    at = dict(slots)
    m = DOCUMENTED.interval_margin_s  # a little over the documented interval
    assert m > 0
    assert [at["create0"], at["create1"], at["create2"]] == pytest.approx(
        [0.0, 4.5 + m, 2 * (4.5 + m)]
    )
    assert [at["list0"], at["list1"], at["list2"]] == pytest.approx([0.0, 1.0 + m, 2 * (1.0 + m)])
    # Show and destroy share a path, not a limit; destroys of any id share one.
    assert at["show"] == 0.0 and [at["destroy0"], at["destroy1"]] == pytest.approx([0.0, 3.0 + m])


async def test_search_allows_ten_a_minute() -> None:
    vt = VirtualTime()
    pacer = _pacer(vt)
    times: list[float] = []

    async def search() -> None:
        await pacer.wait("POST", "/api/v0/bundles/")
        times.append(vt.now)

    await vt.run(*(search() for _ in range(23)))
    assert times[:10] == [0.0] * 10
    assert times[10:20] == [60.0] * 10 and times[20:] == [120.0] * 3
    for i in range(len(times) - 10):
        assert times[i + 10] - times[i] >= 60.0, "never 11 searches within a minute"


async def test_a_429_blocks_the_endpoint_past_its_penalty_for_everyone() -> None:
    """Create B reserved t=4.5 while create A's request was in flight; A is
    refused. B does not go at 4.5: both wait out the 12 s penalty, 4.5 s apart."""
    vt = VirtualTime()
    pacer = _pacer(vt)
    sent: dict[str, float] = {}

    async def refused_then_retry() -> None:
        await pacer.wait("PUT", "/api/v0/asks/1/")
        await vt.sleep(0.2)  # in flight; the answer is a 429
        delay = pacer.refused("PUT", "/api/v0/asks/1/", attempt=0, backoff_base=0.5)
        assert delay >= 12.0 + DOCUMENTED.penalty_margin_s
        await vt.sleep(delay)
        await pacer.wait("PUT", "/api/v0/asks/1/")
        sent["A retry"] = vt.now

    async def other() -> None:
        await asyncio.sleep(0)  # asks after A, before A's answer
        await pacer.wait("PUT", "/api/v0/asks/2/")
        sent["B"] = vt.now

    await vt.run(refused_then_retry(), other())
    assert sent["A retry"] >= 12.7 and sent["B"] >= 12.7
    assert abs(sent["A retry"] - sent["B"]) >= 4.5
    # Other endpoints are not held up by a create's penalty.
    before = vt.now
    await vt.run(pacer.wait("GET", "/api/v1/instances/"))
    assert vt.now == before


async def test_backoff_grows_but_never_under_the_penalty() -> None:
    pacer = Pacer(DOCUMENTED, rng=random.Random(2))
    for attempt in range(4):
        delay = pacer.refused("GET", "/api/v1/instances/", attempt=attempt, backoff_base=0.5)
        assert delay >= max(1.0 + DOCUMENTED.penalty_margin_s, 0.5 * 2**attempt)
    assert NO_PACING.create.interval_s == 0 and NO_PACING.search.per_window == 10


# ------------------------------------------------------- over real HTTP

# Creates 0.9 s apart, a 2.4 s penalty after a 429, lists 0.2 s apart: wide
# enough that one request held up 0.3 s in transit on a loaded machine does
# not bring two arrivals under 0.6 of the interval (at 1/15 it did, under
# three pytest workers).
SCALE = 1 / 5
CREATE = DOCUMENTED.create.interval_s * SCALE
PENALTY = DOCUMENTED.create.penalty_s * SCALE


async def test_concurrent_callers_of_one_client_are_spaced() -> None:
    """What every activity of a worker does: share one client. Without pacing
    the four creates arrive within milliseconds of each other."""

    def answer(req: StubRequest) -> tuple[int, object]:
        if req.method == "PUT":
            return 200, {"success": True, "new_contract": 1}
        return 200, instances_page([])

    with VastStub(answer) as stub:
        async with VastClient(KEY, stub.url, pacing=DOCUMENTED.scaled(SCALE)) as vast:
            await asyncio.gather(
                *(vast.create_instance(n, image="i", disk=8, label=f"l{n}") for n in range(4)),
                *(vast.list_instances() for _ in range(3)),
            )
        creates = stub.arrivals("PUT")
        lists = stub.arrivals("GET", "/api/v1/instances/")
    assert len(creates) == 4 and len(lists) == 3
    # From below only, with room for a request delayed in transit.
    assert all(b - a >= 0.6 * CREATE for a, b in itertools.pairwise(creates))
    # The span loses what the first request lost in transit: a loaded make test
    # once measured 2.429 s for 2.43. Without pacing it is a few milliseconds.
    assert creates[-1] - creates[0] >= 3 * CREATE * 0.8
    assert lists[-1] - lists[0] >= 2 * DOCUMENTED.list.interval_s * SCALE * 0.8


async def test_two_clients_can_share_one_pacer() -> None:
    def answer(req: StubRequest) -> tuple[int, object]:
        return 200, {"success": True, "new_contract": 1}

    with VastStub(answer) as stub:
        one = VastClient(KEY, stub.url, pacing=DOCUMENTED.scaled(SCALE))
        async with one, VastClient(KEY, stub.url, pacer=one.pacer) as two:
            await asyncio.gather(
                one.create_instance(1, image="i", disk=8, label="a"),
                two.create_instance(2, image="i", disk=8, label="b"),
            )
        a, b = stub.arrivals("PUT")
    assert b - a >= 0.6 * CREATE


async def test_a_refused_create_is_retried_only_after_the_penalty() -> None:
    def answer(req: StubRequest) -> tuple[int, object]:
        if len(stub.arrivals("PUT")) == 1:
            return 429, "API requests too frequent endpoint threshold=4.5"
        return 200, {"success": True, "new_contract": 9}

    with VastStub(answer) as stub:
        async with VastClient(
            KEY, stub.url, pacing=DOCUMENTED.scaled(SCALE), backoff_base=0.001
        ) as vast:
            assert await vast.create_instance(1, image="i", disk=8, label="x") == 9
        refused, retried = stub.arrivals("PUT")
    assert retried - refused >= PENALTY


async def test_429_without_retries_left_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(req: StubRequest) -> tuple[int, object]:
        return 429, {"detail": "API requests too frequent endpoint threshold=1.0"}

    with VastStub(answer) as stub:
        async with VastClient(KEY, stub.url, pacing=NO_PACING, max_429_retries=1) as vast:
            with pytest.raises(VastRateLimited) as info:
                await vast.list_instances()
    assert info.value.status == 429 and "too frequent" in str(info.value)
    assert len(stub.requests) == 2


def test_pacing_factor_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        DOCUMENTED.scaled(-1)


async def test_the_documented_pacing_is_the_default() -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json={"offers": []}))
    async with VastClient(KEY, "https://vast.test", transport=transport) as vast:
        assert vast.pacer.pacing == DOCUMENTED
