"""The simulated market: the real one's size and mix, its RAM mix and prices,
determinism by seed, churn, and the offers a create cannot have."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

import pytest

from fleet_agent.fleet.capacity import record_proofs_per_hour
from fleet_agent.fleet.offer_query import allowed_gpu_names, offer_filters
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.models import AgentConfig
from simulator import DEFAULT_OFFERS, ApiError, Market
from simulator.catalogue import gpu_names
from simulator.gpus import GPU_SPECS
from simulator.market import _first
from simulator.prover import rental_ram_mb
from simulator.query import sort_records

CONSUMER = {s.name for s in GPU_SPECS if s.kind == "consumer"}


@pytest.fixture(scope="module")
def big() -> Market:
    """The default market: vast.ai's size."""
    return Market(seed=1, speed=0, scenario_name="ideal", start_epoch=1.8e9)


def _listed(market: Market) -> list[dict[str, Any]]:
    return market.listed_offers()


def test_the_default_market_is_the_real_ones_size_and_mostly_unwanted(big: Market) -> None:
    offers = _listed(big)
    assert len(offers) == DEFAULT_OFFERS == 10_000
    assert len({o["gpu_name"] for o in offers}) >= 30
    can_prove = sum(1 for o in offers if record_proofs_per_hour(o) > 0)
    assert can_prove < 0.7 * len(offers)
    # What the default guardrails accept is a small minority.
    config = AgentConfig()
    names = allowed_gpu_names(config.allowed_gpus, gpu_names())
    wanted = big.search_offers({**offer_filters(config, ProverSpec(), names), "limit": 1000})
    assert 0 < len(wanted) < 0.05 * len(offers)
    # Hosts a careful renter avoids are common.
    assert sum(not o["verified"] for o in offers) > 0.2 * len(offers)
    assert sum(o["external"] for o in offers) > 0.05 * len(offers)
    assert sum(o["reliability2"] < 0.9 for o in offers) > 0.1 * len(offers)
    assert sum(o["direct_port_count"] == 0 for o in offers) > 0.2 * len(offers)
    # The cheapest 200 are almost all cards nobody proves on.
    cheapest = sorted(offers, key=lambda o: o["dph_base"])[:200]
    assert sum(record_proofs_per_hour(o) > 0 for o in cheapest) < 40


def test_ram_per_gpu_follows_the_market_and_high_ram_consumer_hosts_cost_more(
    big: Market,
) -> None:
    consumer = [o for o in _listed(big) if o["gpu_name"] in CONSUMER]
    # A rental's RAM is its share of the host's (the row lists the host's).
    per_gpu = [rental_ram_mb(o) / 1024 / o["num_gpus"] for o in consumer]
    assert statistics.median(per_gpu) < 64  # most consumer hosts: 16-64 GiB a card
    assert sum(r >= 240 for r in per_gpu) < 0.08 * len(consumer)  # rare
    assert sum(r < 60 for r in per_gpu) > 0.5 * len(consumer)  # cannot hold a proof's SRS

    def price(o: dict[str, Any]) -> float:
        return float(o["dph_base"]) / int(o["num_gpus"])

    for gpu in ("RTX 3090", "RTX 4090"):
        mine = [o for o in consumer if o["gpu_name"] == gpu]
        low = [price(o) for o in mine if rental_ram_mb(o) / 1024 / o["num_gpus"] < 70]
        high = [price(o) for o in mine if o["cpu_ram"] / 1024 / o["num_gpus"] >= 240]
        assert low and high
        assert statistics.median(high) > 1.3 * statistics.median(low)


def test_a_market_is_a_function_of_its_seed() -> None:
    def run(seed: int) -> list[tuple[int, float, str]]:
        m = Market(seed=seed, speed=0, offer_count=300, start_epoch=1.8e9)
        m.advance(3 * 3600)
        return [(o["id"], o["dph_base"], o["gpu_name"]) for o in _listed(m)]

    assert run(4) == run(4)
    assert run(4) != run(5)


def test_a_rentals_fate_does_not_hang_on_the_requests_before_it() -> None:
    # Every request rolls the market's rate-limit fault; a rental's faults
    # roll on a stream of its own, so one listing more before it (a poll
    # that raced a benchmark's step) leaves what the machine does unchanged.
    def rent_five(extra_requests: int) -> list[tuple[str, float, bool]]:
        m = Market(seed=7, speed=0, offer_count=300, start_epoch=1.8e9)
        m.set_faults(
            None,
            rate_limit_rate=0.3,
            offer_taken_rate=0.2,
            stuck_loading_rate=0.2,
            boot_fail_rate=0.3,
            create_error_rate=0.2,
        )
        for _ in range(extra_requests):
            m.admit("GET instances", "key")
        out = []
        for offer in sorted(_listed(m), key=lambda o: o["id"])[:5]:
            try:
                made = m.rent(offer["id"], {"image": "img", "disk": 8})
            except ApiError as exc:
                out.append((exc.error, 0.0, False))
                continue
            row = next(r for r in m.state()["instances"] if r["id"] == made.instance_id)
            out.append((row["boot_outcome"], row["expected_proofs_per_hour"], made.answer == "ok"))
        return out

    assert rent_five(0) == rent_five(1) == rent_five(7)


def test_the_offers_listed_later_do_not_hang_on_our_rentals() -> None:
    """Other hosts' listings do not depend on what we rent: with instance ids
    drawn from the offer book's stream, one rental more gave every offer
    listed after it another id, and so another machine and price, and a
    policy that rented one bridge more met another market all day."""

    def listed_later(rentals: int) -> list[tuple[int, float, str]]:
        m = Market(seed=11, speed=0, offer_count=300, start_epoch=1.8e9)
        first = set(m.offer_ids())
        rented = 0
        for offer in sorted(_listed(m), key=lambda o: o["id"]):
            if rented == rentals:
                break
            try:
                m.rent(offer["id"], {"image": "img", "disk": 8})
            except ApiError:
                continue
            rented += 1
        assert rented == rentals
        m.advance(3 * 3600)
        return [(o["id"], o["dph_base"], o["gpu_name"]) for o in _listed(m) if o["id"] not in first]

    later = listed_later(0)
    assert later, "offers arrive in three hours"
    assert listed_later(1) == later == listed_later(4)


def test_offers_arrive_and_leave_and_the_size_holds() -> None:
    m = Market(seed=2, speed=0, offer_count=400, start_epoch=1.8e9)
    before = set(m.offer_ids())
    m.advance(4 * 3600)
    after = set(m.offer_ids())
    assert before - after and after - before
    assert 300 <= len(after) <= 500


def test_listed_offers_a_create_cannot_have(big: Market) -> None:
    """Offers that are rented or not rentable stay listed (a search that does
    not filter them sees them) and a create of one is refused as gone."""
    counts = Counter((o["rentable"], o["rented"]) for o in _listed(big))
    assert counts[(False, True)] > 0 and counts[(False, False)] > 0
    taken = next(o for o in _listed(big) if not o["rentable"])
    with pytest.raises(ApiError) as info:
        big.rent(taken["id"], {"image": "img", "disk": 8})
    assert info.value.error == "no_such_ask"
    assert taken["id"] in big.offer_ids()


@pytest.mark.parametrize(
    "order",
    [
        [("dph_base", False)],
        [("reliability2", True)],
        [("reliability2", False), ("num_gpus", True)],
        [("verified", True)],
        [("gpu_name", False)],  # text: the general sort
    ],
)
def test_the_fast_partial_sort_orders_as_the_query_engine_does(
    big: Market, order: list[tuple[str, bool]]
) -> None:
    rows = _listed(big)[:2000]
    for n, r in enumerate(rows):
        if n % 7 == 0:
            r["reliability2"] = None  # None sorts first ascending, last descending
    keys = [*order, ("id", False)]
    assert _first(rows, keys, 300) == sort_records(rows, keys)[:300]
