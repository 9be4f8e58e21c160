"""The load-time estimate of an offer, and the autopilot's cover weighing it."""

from __future__ import annotations

from typing import Any

import pytest

from fleet_agent.fleet.load_time import BOOT_MINUTES, est_load_minutes
from fleet_agent.fleet.policy import LOAD_WEIGHT, UNKNOWN_LOAD_MINUTES, choose_offers


def test_the_estimate_is_the_parameters_over_the_link_plus_boot() -> None:
    # 47 GiB = 50.5 GB = 404 Gb: 6.7 min at 1 Gb/s, 33.7 min at 200 Mb/s.
    assert est_load_minutes(1_000) == pytest.approx(BOOT_MINUTES + 6.73, abs=0.01)
    assert est_load_minutes(200) == pytest.approx(BOOT_MINUTES + 33.64, abs=0.01)
    assert est_load_minutes(None) is None
    assert est_load_minutes(0) is None


def offer(offer_id: int, dph: float, rate: float, inet: float | None) -> dict[str, Any]:
    return {
        "offer_id": offer_id,
        "dph": dph,
        "est_proofs_per_hour": rate,
        "est_load_minutes": est_load_minutes(inet),
    }


def test_at_nearly_the_same_price_the_fast_link_is_rented() -> None:
    slow = offer(1, 1.00, 50, 150)  # ~49 min to load
    fast = offer(2, 1.03, 50, 1_500)  # ~8.5 min
    assert [o["offer_id"] for o in choose_offers([slow, fast], 40)] == [2]


def test_a_much_cheaper_slow_offer_still_wins() -> None:
    slow = offer(1, 1.00, 50, 150)
    dear = offer(2, 1.40, 50, 1_500)
    assert [o["offer_id"] for o in choose_offers([slow, dear], 40)] == [1]


def test_an_offer_without_a_listed_link_counts_as_slow() -> None:
    unknown = offer(1, 1.00, 50, None)
    known = offer(2, 1.00, 50, 480)  # ~18 min
    assert UNKNOWN_LOAD_MINUTES >= 60 and LOAD_WEIGHT > 0
    assert [o["offer_id"] for o in choose_offers([unknown, known], 40)] == [2]
