"""Load time (fleet_agent/fleet/load_time.py): the estimate an offer row
carries, and how long a boot may load before the machine counts as stuck."""

from __future__ import annotations

import pytest

from activities.fleet_provers import failure_of
from activities.fleet_results import offer_row
from fleet_agent.autopilot.policy import plan_fleet
from fleet_agent.fleet.load_time import (
    BOOT_MINUTES,
    STUCK_LOADING_MAX_MINUTES,
    STUCK_LOADING_MIN_MINUTES,
    est_load_minutes,
    stuck_loading_minutes,
)
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.snapshot import summarize
from fleet_agent.vast.models import Instance, Offer


def test_the_estimate_is_the_parameters_over_the_link_plus_boot() -> None:
    # 47 GiB = 50.5 GB = 404 Gb: 6.7 min at 1 Gb/s, 33.7 min at 200 Mb/s.
    assert est_load_minutes(1_000) == pytest.approx(BOOT_MINUTES + 6.73, abs=0.01)
    assert est_load_minutes(200) == pytest.approx(BOOT_MINUTES + 33.64, abs=0.01)
    assert est_load_minutes(None) is None
    assert est_load_minutes(0) is None


def test_every_offer_row_shows_the_link_and_the_estimate() -> None:
    base = {"id": 7, "gpu_name": "RTX 4090", "num_gpus": 1, "gpu_ram": 24_564.0}
    fast = offer_row(
        Offer(**base, cpu_ram=128_000.0, dph_total=0.4, inet_down=1_000.0), ProverSpec()
    )
    assert (fast["inet_down_mbps"], fast["est_load_minutes"]) == (1_000.0, 11)
    silent = offer_row(Offer(**base, cpu_ram=128_000.0, dph_total=0.4), ProverSpec())
    assert (silent["inet_down_mbps"], silent["est_load_minutes"]) == (None, None)


def test_a_boot_is_stuck_after_twice_its_image_pull_between_12_and_30_minutes() -> None:
    # 8 GB at 200 Mb/s: a 5.3 min pull, so 6 + 10.7 min; 1 Gb/s: the floor.
    assert stuck_loading_minutes(200, 8.0) == pytest.approx(16.67, abs=0.01)
    assert stuck_loading_minutes(1_000, 8.0) == STUCK_LOADING_MIN_MINUTES
    # A big image on a slow link, or a link nobody listed: the ceiling.
    assert stuck_loading_minutes(100, 40.0) == STUCK_LOADING_MAX_MINUTES
    assert stuck_loading_minutes(None, 8.0) == STUCK_LOADING_MAX_MINUTES
    assert stuck_loading_minutes(0, 8.0) == STUCK_LOADING_MAX_MINUTES


def _loading(iid: int, inet_down: float, age_min: float, now: float) -> Instance:
    return Instance.model_validate(
        {
            "id": iid,
            "actual_status": "loading",
            "intended_status": "running",
            "label": f"fleet-agent/a/r1-{iid:010x}",
            "gpu_name": "RTX 4090",
            "num_gpus": 1,
            "cpu_ram": 128 * 1024,
            "dph_total": 0.5,
            "inet_down": inet_down,
            "start_date": now - age_min * 60,
            "machine_id": 1000 + iid,
        }
    )


def test_a_hung_boot_on_a_fast_link_is_replaced_long_before_one_on_a_slow_link() -> None:
    """13 minutes loading: stuck on a 1 Gb/s host (limit 12), still booting
    on a 200 Mb/s one (limit 16.7); the autopilot replaces only the first,
    and the monitor records only its host."""
    now = 100_000.0
    fast, slow = _loading(1, 1_000, 13, now), _loading(2, 200, 13, now)
    snap = summarize([fast, slow], target=100, now_epoch=now, min_release_age_minutes=45)
    rows = {r.id: r for r in snap.instances}
    assert (rows[1].loading_limit_minutes, rows[2].loading_limit_minutes) == (12.0, 16.7)
    assert rows[1].releasable and not rows[2].releasable
    plan = plan_fleet([r.model_dump() for r in snap.instances], 100)
    assert [(iid, why) for iid, why in plan.destroy] == [(1, "stuck loading for 13 min")]
    assert failure_of(fast, None, now, 20.0) == ("stuck", "instance 1 still loading after 13 min")
    assert failure_of(slow, None, now, 20.0) is None
    # A bigger image gives the same link more time.
    assert failure_of(fast, None, now, 20.0, image_gb=40.0) is None
    # Rebooting is exempt, however long it takes.
    rebooting = _loading(3, 1_000, 60, now).model_copy(update={"actual_status": "rebooting"})
    assert failure_of(rebooting, None, now, 20.0) is None
