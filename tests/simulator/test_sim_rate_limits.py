"""vast.ai's documented rate limits in the simulator: per endpoint and identity,
the create penalty, the search's 10 a minute, the 429's shape, the switch."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from simulator import SimServer
from simulator.ratelimit import RateLimiter


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def limiter(clock: FakeClock) -> RateLimiter:
    return RateLimiter(clock=clock)


@pytest.mark.parametrize(
    ("method", "route", "interval"),
    [
        ("GET", "instances_v1", 1.0),
        ("GET", "instance", 2.0),
        ("DELETE", "instance", 3.0),
        ("PUT", "instance", 1.0),
        ("PUT", "reboot", 1.0),
    ],
)
def test_minimum_interval_per_endpoint(
    limiter: RateLimiter, clock: FakeClock, method: str, route: str, interval: float
) -> None:
    assert limiter.check(method, route, "key") is None
    clock.t += interval - 0.01
    refused = limiter.check(method, route, "key")
    assert refused is not None and refused.threshold == f"{interval}"
    assert limiter.check(method, route, "other-key") is None  # per identity
    clock.t += 0.02  # the refused request did not count
    assert limiter.check(method, route, "key") is None


def test_show_and_destroy_share_a_path_but_not_a_limit(limiter: RateLimiter) -> None:
    assert limiter.check("GET", "instance", "k") is None
    assert limiter.check("DELETE", "instance", "k") is None
    assert limiter.check("GET", "instances_v1", "k") is None


def test_create_penalty_starts_again_while_the_client_keeps_asking(
    limiter: RateLimiter, clock: FakeClock
) -> None:
    assert limiter.check("PUT", "asks", "k") is None
    clock.t += 1.0
    assert limiter.check("PUT", "asks", "k") is not None  # 429: 12 s of penalty
    clock.t += 11.0
    assert limiter.check("PUT", "asks", "k") is not None  # inside it: starts again
    clock.t += 11.9
    assert limiter.check("PUT", "asks", "k") is not None
    clock.t += 12.1  # backed off longer than the penalty
    assert limiter.check("PUT", "asks", "k") is None
    clock.t += 4.6  # then the 4.5 s interval again
    assert limiter.check("PUT", "asks", "k") is None


def test_search_allows_ten_a_minute(limiter: RateLimiter, clock: FakeClock) -> None:
    for _ in range(10):
        assert limiter.check("POST", "bundles", "k") is None
        clock.t += 1.0
    refused = limiter.check("POST", "bundles", "k")
    assert refused is not None and refused.threshold == "10/minute"
    clock.t += 50.5  # the first call leaves the window
    assert limiter.check("POST", "bundles", "k") is None
    assert limiter.check("POST", "bundles", "k") is not None


@pytest.fixture
def limited() -> Iterator[SimServer]:
    with SimServer(seed=3, speed=0, scenario="ideal", offers=50) as sim:  # limits on: the default
        yield sim


def test_limits_are_on_by_default_and_the_429_is_the_services(limited: SimServer) -> None:
    assert limited.market.rate_limits is True
    headers = {"Authorization": f"Bearer {limited.api_key}"}
    with httpx.Client(base_url=limited.url, headers=headers) as c:
        assert c.get("/api/v1/instances/").status_code == 200
        second = c.get("/api/v1/instances/")
        assert second.status_code == 429 and "Retry-After" not in second.headers
        assert second.headers["content-type"].startswith("text/plain")
        assert second.text == "API requests too frequent endpoint threshold=1.0"
        # Destroy documents a JSON 429.
        assert c.delete("/api/v0/instances/1/").status_code == 404
        refused = c.delete("/api/v0/instances/1/")
        assert refused.status_code == 429
        assert refused.json() == {
            "success": False,
            "error": "rate_limit_exceeded",
            "msg": "API requests too frequent endpoint threshold=3.0",
        }
    assert limited.market.counters["rate_limited"] == 2


def test_the_switch_turns_them_off_and_on(limited: SimServer) -> None:
    headers = {"Authorization": f"Bearer {limited.api_key}"}
    with httpx.Client(base_url=limited.url, headers=headers) as c:
        assert c.post("/_sim/rate-limits", json={"enabled": False}).json()["enabled"] is False
        assert [c.get("/api/v1/instances/").status_code for _ in range(3)] == [200] * 3
        assert c.post("/_sim/rate-limits", json={"enabled": True}).status_code == 200
        c.get("/api/v1/instances/")
        assert c.get("/api/v1/instances/").status_code == 429
        bad = c.post("/_sim/rate-limits", json={"enabled": "no"})
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_args"
    assert limited.market.state()["rate_limits"] is True
