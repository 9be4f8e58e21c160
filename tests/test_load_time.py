"""The load-time estimate an offer row carries (fleet_agent/fleet/load_time.py)."""

from __future__ import annotations

import pytest

from activities.fleet_results import offer_row
from fleet_agent.fleet.load_time import BOOT_MINUTES, est_load_minutes
from fleet_agent.vast.models import Offer


def test_the_estimate_is_the_parameters_over_the_link_plus_boot() -> None:
    # 47 GiB = 50.5 GB = 404 Gb: 6.7 min at 1 Gb/s, 33.7 min at 200 Mb/s.
    assert est_load_minutes(1_000) == pytest.approx(BOOT_MINUTES + 6.73, abs=0.01)
    assert est_load_minutes(200) == pytest.approx(BOOT_MINUTES + 33.64, abs=0.01)
    assert est_load_minutes(None) is None
    assert est_load_minutes(0) is None


def test_every_offer_row_shows_the_link_and_the_estimate() -> None:
    base = {"id": 7, "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": 24_564.0}
    fast = offer_row(Offer(**base, cpu_ram=128_000.0, dph_total=0.4, inet_down=1_000.0))
    assert (fast["inet_down_mbps"], fast["est_load_minutes"]) == (1_000.0, 11)
    silent = offer_row(Offer(**base, cpu_ram=128_000.0, dph_total=0.4))
    assert (silent["inet_down_mbps"], silent["est_load_minutes"]) == (None, None)
