"""The simulator's own accounting: what vast.ai would have billed, in sim time.

`dph_total` while not stopped, storage only while stopped, nothing after the
destroy, a bid instance at its bid plus storage, the parameter download at
`inet_down_cost` per GB; destroyed instances stay reported, and the charges
survive a restart of the simulator.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from simulator import SimServer
from simulator.billing import BYTES_PER_BILLED_GB, BYTES_PER_BILLED_KB
from testkit.sim_helpers import advance_until, api, find_offer, rent, row, truth


def _server(path: Path | None = None) -> SimServer:
    return SimServer(
        seed=5,
        speed=0,
        scenario="ideal",
        offers=400,
        rate_limits=False,
        start_epoch=1.8e9,
        state_path=path,
    )


def _charged(sim: SimServer, iid: int) -> dict[str, float]:
    (found,) = (c for c in sim.market.charges()["instances"] if c["id"] == iid)
    return dict(found)


def test_running_stopped_and_destroyed_time_is_billed_as_vast_bills_it() -> None:
    with _server() as sim:
        offer = find_offer(sim)
        iid = rent(sim, offer["id"])
        shown = row(sim, iid)
        dph, storage = shown["dph_total"], shown["storage_total_cost"]
        assert 0 < storage < dph
        sim.market.advance(3600)
        assert sim.market.state()["spend_per_hour"] == pytest.approx(dph, abs=1e-4)
        sim.market.set_instance_state(iid, "stop")
        assert sim.market.state()["spend_per_hour"] == pytest.approx(storage, abs=1e-4)
        sim.market.advance(1800)
        sim.market.set_instance_state(iid, "start")  # loading again: billed in full
        sim.market.advance(900)
        with api(sim) as c:
            assert c.delete(f"/api/v0/instances/{iid}/").status_code == 200
        sim.market.advance(7200)  # nothing after the destroy
        bill = _charged(sim, iid)
        assert bill["seconds"] == pytest.approx(6300)
        assert bill["stopped_seconds"] == pytest.approx(1800)
        expected_time = 4500 / 3600 * dph + 1800 / 3600 * storage
        assert bill["time_usd"] == pytest.approx(expected_time, abs=2e-6)
        # The parameter download is the traffic: billed per GB at inet_down_cost.
        down_gb = bill["download_gb"]
        assert down_gb > 40, "an hour of fetching brings most of the ~50 GB"
        assert bill["bandwidth_usd"] == pytest.approx(down_gb * offer["inet_down_cost"], abs=2e-6)
        assert bill["total_usd"] == pytest.approx(bill["time_usd"] + bill["bandwidth_usd"])
        assert bill["ended_at"] == pytest.approx(1.8e9 + 6300)
        assert sim.market.instance_ids() == [], "dropped from the list, still in the charges"


def test_rows_count_the_traffic_the_charges_bill() -> None:
    with _server() as sim:
        offer = find_offer(sim)
        iid = rent(sim, offer["id"])
        advance_until(sim, lambda: truth(sim, iid)["prover_phase"] == "fetching_params", step=30)
        sim.market.advance(60)
        shown = row(sim, iid)
        assert shown["inet_up_billed"] == 0
        bill = _charged(sim, iid)
        billed_gb = shown["inet_down_billed"] * BYTES_PER_BILLED_KB / BYTES_PER_BILLED_GB
        assert billed_gb == pytest.approx(bill["download_gb"], rel=1e-6)
        assert 0 < billed_gb < 40, "fetching for a minute"


def test_a_bid_instance_bills_its_bid_plus_storage() -> None:
    with _server() as sim:
        offer = find_offer(sim)
        bid = round(offer["min_bid"] * 1.2, 4)
        iid = rent(sim, offer["id"], price=bid)
        sim.market.advance(7200)
        shown = row(sim, iid)
        assert shown["dph_total"] == pytest.approx(bid + shown["storage_total_cost"])
        bill = _charged(sim, iid)
        assert bill["time_usd"] == pytest.approx(2 * shown["dph_total"], abs=2e-6)


def test_charges_are_served_and_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "sim.json"
    with _server(path) as first:
        kept = rent(first, find_offer(first)["id"])
        gone = rent(first, find_offer(first)["id"])
        first.market.advance(3600)
        first.market.set_instance_state(kept, "stop")
        first.market.advance(600)
        first.market.destroy_instance(gone)
        first.market.advance(600)
        before = httpx.get(f"{first.url}/_sim/charges").json()
    assert [c["id"] for c in before["instances"]] == sorted([kept, gone])
    assert before["total_usd"] == pytest.approx(
        sum(c["total_usd"] for c in before["instances"]), abs=1e-5
    )
    with _server(path) as second:
        assert second.restored
        after = second.market.charges()
        assert after["instances"] == before["instances"], "speed 0: nothing moved"
        second.market.advance(3600)
        again = {c["id"]: c for c in second.market.charges()["instances"]}
        assert again[gone] == next(c for c in before["instances"] if c["id"] == gone)
        # Stopped time goes on from the saved figure, at the storage rate.
        assert again[kept]["stopped_seconds"] == pytest.approx(4800)
