"""The exact cheapest-cover oracle, against brute force on small random markets."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from fleet_agent.fleet.oracle import Item, cheapest_cover, cheapest_cover_between


def brute_force(items: list[Item], target: float, high: float = math.inf) -> float:
    best = math.inf
    for n in range(len(items) + 1):
        for combo in itertools.combinations(items, n):
            units = sum(math.floor(i.rate) for i in combo)
            if math.ceil(target) <= units <= high:
                best = min(best, sum(i.cost for i in combo))
    return best


def random_market(rng: random.Random) -> list[Item]:
    return [
        Item(key=k, cost=round(rng.uniform(0.1, 3.0), 3), rate=round(rng.uniform(1, 60), 1))
        for k in range(rng.randint(1, 11))
    ]


@pytest.mark.parametrize("seed", range(40))
def test_the_cover_is_as_cheap_as_brute_force_and_meets_the_target(seed: int) -> None:
    rng = random.Random(seed)
    items = random_market(rng)
    target = rng.uniform(1, sum(i.rate for i in items) * 0.8)
    cover = cheapest_cover(items, target)
    expected = brute_force(items, target)
    assert cover.met == (expected < math.inf)
    if cover.met:
        assert cover.cost == pytest.approx(expected)
        chosen = [i for i in items if i.key in cover.keys]
        assert len(chosen) == len(cover.keys) == len(set(cover.keys))
        assert sum(i.rate for i in chosen) >= target
        assert cover.cost == pytest.approx(sum(i.cost for i in chosen))


def test_a_small_gap_is_not_covered_with_a_huge_machine() -> None:
    items = [Item(1, cost=5.0, rate=500), Item(2, cost=0.4, rate=30), Item(3, cost=0.5, rate=30)]
    assert cheapest_cover(items, 50).keys == [2, 3]


def test_nothing_is_needed_for_no_target_and_all_when_too_little() -> None:
    items = [Item(1, cost=1.0, rate=10), Item(2, cost=1.0, rate=0.5)]
    assert cheapest_cover(items, 0).keys == []
    short = cheapest_cover(items, 100)
    assert not short.met and short.keys == [1]  # a machine under 1 proof/h counts for nothing


@pytest.mark.parametrize("seed", range(40))
def test_the_cover_inside_a_band_is_as_cheap_as_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    items = random_market(rng)
    low = rng.uniform(1, sum(i.rate for i in items) * 0.8)
    high = low + rng.uniform(0, 30)
    cover = cheapest_cover_between(items, low, high)
    expected = brute_force(items, low, math.floor(high))
    assert (cover is not None) == (expected < math.inf)
    if cover is not None:
        assert cover.cost == pytest.approx(expected)
        chosen = [i for i in items if i.key in cover.keys]
        assert len(chosen) == len(cover.keys) == len(set(cover.keys))
        # Met surely; past `high` by less than a unit per machine at most.
        assert low <= sum(i.rate for i in chosen) < high + len(chosen)


def test_a_band_that_no_set_lands_in_has_no_cover() -> None:
    items = [Item(1, cost=0.2, rate=25), Item(2, cost=0.3, rate=25)]
    assert cheapest_cover_between(items, 10, 20) is None
    assert cheapest_cover_between(items, 10, 30) == cheapest_cover_between(items[:1], 10, 30)
    assert cheapest_cover_between(items, 0, 5) is not None
