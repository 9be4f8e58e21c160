"""The simulated vast.ai market seen through the client: an instance's
lifecycle, reproducible seeds, churn, the control API, the capacity model."""

from __future__ import annotations

import httpx
import pytest

from fleet_agent.vast.client import VastClient
from fleet_agent.vast.errors import VastNotFound, VastServerError
from fleet_agent.vast.models import TERMINAL_STATUSES, Instance
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer, proofs_per_hour
from tests.helpers.vast import IMAGE, KEY, _rent_one, sim, small_market, vast

__all__ = ["sim", "vast"]  # the fixtures, imported for pytest


async def _status(vast: VastClient, instance_id: int) -> Instance:
    shown = await vast.show_instance(instance_id)
    assert shown is not None
    return shown


async def test_lifecycle_null_loading_running(vast: VastClient, sim: SimServer) -> None:
    instance_id = await _rent_one(vast, "fleet-life-1")
    assert (await _status(vast, instance_id)).actual_status is None
    sim.market.advance(41)  # provisioning takes at most 40 s
    loading = await _status(vast, instance_id)
    assert loading.actual_status == "loading"
    sim.market.advance(3600)  # image pulls take minutes, not an hour
    running = await _status(vast, instance_id)
    assert running.is_running and running.status_msg and "success" in running.status_msg
    # Like the real service's, rows say nothing about proving (the prover's
    # status port does: tests/simulator/test_sim_prover.py).
    assert "proofs_per_hour" not in running.extras


async def test_dying_instance_never_comes_back(vast: VastClient, sim: SimServer) -> None:
    sim.market.set_faults(die_next=1, die_after_s=300)
    instance_id = await _rent_one(vast, "fleet-die-1")
    sim.market.advance(3600)
    dead = await _status(vast, instance_id)
    assert dead.actual_status in TERMINAL_STATUSES and dead.is_terminal
    for _ in range(5):
        sim.market.advance(6 * 3600)
        again = await _status(vast, instance_id)
        assert again.actual_status == dead.actual_status


async def test_killed_instance_stays_dead(vast: VastClient, sim: SimServer) -> None:
    instance_id = await _rent_one(vast, "fleet-kill-1")
    sim.market.advance(3600)
    assert (await _status(vast, instance_id)).is_running
    async with httpx.AsyncClient(base_url=sim.url) as raw:
        resp = await raw.post(f"/_sim/kill/{instance_id}", json={"status": "offline"})
    assert resp.status_code == 200
    sim.market.advance(24 * 3600)
    assert (await _status(vast, instance_id)).actual_status == "offline"


async def test_stuck_and_failed_boots(vast: VastClient, sim: SimServer) -> None:
    sim.market.set_faults(stuck_loading_next=1)
    stuck = await _rent_one(vast, "fleet-stuck-1")
    sim.market.set_faults(boot_fail_next=1)
    failed = await _rent_one(vast, "fleet-fail-1")
    sim.market.advance(10 * 3600)
    assert (await _status(vast, stuck)).actual_status == "loading"
    assert (await _status(vast, failed)).actual_status in ("exited", "offline", "created")


async def test_seed_reproducibility() -> None:
    Run = tuple[list[tuple[int, float]], list[str], list[tuple[int, str | None]]]

    async def run(seed: int) -> Run:
        with small_market(seed, "chaos") as s:
            s.market.set_faults(create_hang_rate=0.0)  # keep the test fast
            async with VastClient(
                KEY, s.url, backoff_base=0, max_429_retries=20, pacing=NO_PACING
            ) as vast:
                offers = await vast.search_offers({}, order="dph_total", limit=20)
                outcomes = []
                for n, offer in enumerate(offers[:8]):
                    try:
                        made = await vast.create_instance(
                            offer.id, image=IMAGE, disk=8, label=f"r{n}"
                        )
                        outcomes.append(str(made))
                    except (VastNotFound, VastServerError) as exc:
                        outcomes.append(type(exc).__name__)
                s.market.advance(2 * 3600)
                statuses = [(i.id, i.actual_status) for i in await vast.list_instances()]
                return [(o.id, o.dph_total) for o in offers], outcomes, statuses

    first, second, other = await run(123), await run(123), await run(124)
    assert first == second
    assert first[0] != other[0]
    # chaos rolls its faults from the seed too: same failures, same fates.
    assert len({s for _, s in first[2]}) > 1 or any(not o.isdigit() for o in first[1])


async def test_market_churn(sim: SimServer) -> None:
    before = set(sim.market.offer_ids())
    sim.market.advance(4 * 3600)
    after = set(sim.market.offer_ids())
    assert after - before and before - after
    assert 300 <= len(after) <= 700  # arrivals balance departures around the 500 listed


async def test_control_api(sim: SimServer) -> None:
    async with httpx.AsyncClient(base_url=sim.url) as raw:
        state = (await raw.get("/_sim/state")).json()
        assert state["seed"] == 7 and state["offers"] > 0 and state["instances"] == []
        moved = (await raw.post("/_sim/advance", json={"seconds": 60})).json()
        assert moved["now"] == pytest.approx(state["now"] + 60)
        ok = await raw.post("/_sim/faults", json={"scenario": "chaos", "rate_limit_rate": 0})
        assert ok.status_code == 200 and ok.json()["faults"]["boot_fail_rate"] > 0
        bad = await raw.post("/_sim/faults", json={"no_such_fault": 1})
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_args"
        gone = await raw.post("/_sim/kill/1", json={})
        assert gone.status_code == 404
        unknown = await raw.get("/api/v0/nothing/here/", params={"api_key": KEY})
        assert unknown.status_code == 404 and unknown.text == "Not Found"
    assert sim.market.scenario == "chaos"


def test_capacity_model_matches_published_figures() -> None:
    # ~140 s per proof on a 3090/4090 -> ~25 proofs/h on the baseline engine.
    for gpu in ("RTX 3090", "RTX 4090"):
        assert 23 <= proofs_per_hour(gpu, 1, 128 * 1024 * 0.98) <= 28
        # cuzk with more host RAM does better, and never worse.
        assert proofs_per_hour(gpu, 1, 256 * 1024 * 0.98) > 35
        assert proofs_per_hour(gpu, 1, 512 * 1024) > proofs_per_hour(gpu, 1, 256 * 1024)
    assert proofs_per_hour("RTX 3090", 1, 32 * 1024) == 0  # the SRS alone does not fit
    assert proofs_per_hour("H100 SXM", 8, 2048 * 1024) > 8 * 25
