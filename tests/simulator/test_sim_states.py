"""Every instance state the real API shows, reached as a renter, through the
control API and on their own: stopped, frozen, rebooting, unloaded
(destroyed), outbid interruptible instances; and states that do not depend
on how often anyone looks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from simulator import Market, SimServer
from testkit.sim_helpers import (
    advance_until,
    api,
    find_offer,
    prover_status,
    prover_url,
    rent,
    row,
    truth,
)

STATE = ("actual_status", "intended_status", "cur_state", "next_state")


def states(shown: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(shown[k] for k in STATE)


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(
        seed=21, speed=0, scenario="ideal", offers=1000, rate_limits=False, start_epoch=1.8e9
    ) as server:
        yield server


def _proving(sim: SimServer, **create: Any) -> int:
    instance_id = rent(sim, find_offer(sim)["id"], **create)
    advance_until(sim, lambda: truth(sim, instance_id)["prover_phase"] == "proving", step=120)
    return instance_id


def test_the_renter_stops_and_starts_an_instance(sim: SimServer) -> None:
    iid = _proving(sim)
    sim.market.advance(3600)
    with api(sim) as c:
        assert c.put(f"/api/v0/instances/{iid}/", json={"state": "stopped"}).json() == {
            "success": True
        }
        stopped = row(sim, iid)
        assert states(stopped) == ("stopped", "stopped", "stopped", "stopped")
        assert stopped["ports"] == {} and stopped["uptime_mins"] is None
        done = truth(sim, iid)["proofs_completed"]
        sim.market.advance(3600)
        assert (
            truth(sim, iid)["proofs_completed"] == done and not truth(sim, iid)["proofs_per_hour"]
        )
        assert c.put(f"/api/v0/instances/{iid}/", json={"state": "running"}).status_code == 200
        assert row(sim, iid)["actual_status"] == "loading"  # the container starts again
        sim.market.advance(60)
        assert states(row(sim, iid)) == ("running", "running", "running", "running")
        # The parameters are on disk: the prover loads them, it does not fetch them.
        assert prover_status(sim, iid)["phase"] == "starting"
        assert prover_status(sim, iid)["params"]["ready"] is True
        assert c.put(f"/api/v0/instances/{iid}/", json={"label": "renamed"}).status_code == 200
        assert row(sim, iid)["label"] == "renamed"
        bad = c.put(f"/api/v0/instances/{iid}/", json={"state": "paused"})
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_args"
        assert c.put("/api/v0/instances/1/", json={"state": "stopped"}).status_code == 404


def test_a_frozen_instance_keeps_its_prover_where_it_was(sim: SimServer) -> None:
    iid = _proving(sim)
    sim.market.advance(1800)
    url = prover_url(row(sim, iid))
    with api(sim) as c:
        assert c.post(f"/_sim/instances/{iid}/freeze").json()["applied"] is True
        assert states(row(sim, iid)) == ("frozen", "frozen", "running", "running")
        done = truth(sim, iid)["proofs_completed"]
        sim.market.advance(3600)
        assert truth(sim, iid)["proofs_completed"] == done
        with pytest.raises(httpx.ReadTimeout):  # a paused container answers nothing
            httpx.get(url, timeout=0.5)
        assert c.post(f"/_sim/instances/{iid}/unfreeze").json()["applied"] is True
    assert states(row(sim, iid)) == ("running", "running", "running", "running")
    assert prover_status(sim, iid)["phase"] == "proving"  # no restart, no SRS load
    sim.market.advance(3600)
    assert truth(sim, iid)["proofs_completed"] > done


def test_a_reboot_restarts_the_container_and_the_prover(sim: SimServer) -> None:
    iid = _proving(sim)
    sim.market.advance(3600)
    before = prover_status(sim, iid)
    assert before["proofs_completed"] > 0
    url = prover_url(row(sim, iid))
    with api(sim) as c:
        assert c.put(f"/api/v0/instances/reboot/{iid}/", json={}).json() == {"success": True}
        assert states(row(sim, iid)) == ("rebooting", "running", "running", "running")
        with pytest.raises(httpx.TransportError):  # nothing listens while it reboots
            httpx.get(url, timeout=2)
        sim.market.advance(181)
        assert row(sim, iid)["actual_status"] == "running"
        restarted = prover_status(sim, iid)
        assert restarted["phase"] == "starting"
        # A new prover process: its counters start again (the truth goes on).
        assert restarted["proofs_completed"] == 0
        assert restarted["started_at"] > before["started_at"]
        assert truth(sim, iid)["proofs_completed"] >= before["proofs_completed"]
        c.put(f"/api/v0/instances/{iid}/", json={"state": "stopped"})
        again = c.put(f"/api/v0/instances/reboot/{iid}/", json={})
        assert again.json()["success"] is False  # only a running container reboots


def test_hosts_reboot_on_their_own(sim: SimServer) -> None:
    sim.market.set_faults(reboot_rate_per_hour=3.0)
    iid = _proving(sim)
    advance_until(sim, lambda: row(sim, iid)["actual_status"] == "rebooting", step=30)
    back_after = advance_until(sim, lambda: row(sim, iid)["actual_status"] == "running", step=30)
    assert back_after > 0, "a reboot takes time"
    assert row(sim, iid)["actual_status"] == "running"


def test_a_destroyed_instance_lingers_unloaded_then_goes(sim: SimServer) -> None:
    sim.market.set_faults(destroy_linger_s=60)
    iid = _proving(sim)
    with api(sim) as c:
        assert c.delete(f"/api/v0/instances/{iid}/").status_code == 200
        gone = row(sim, iid)
        assert states(gone) == ("exited", "stopped", "unloaded", "unloaded")
        assert "destroyed" in gone["status_msg"]
        listed = c.get("/api/v1/instances/").json()
        assert [i["cur_state"] for i in listed["instances"]] == ["unloaded"]
        assert c.delete(f"/api/v0/instances/{iid}/").status_code == 404  # destroyed already
        assert sim.market.state()["spend_per_hour"] == 0  # released: no more billing
        sim.market.advance(61)
        assert c.get(f"/api/v0/instances/{iid}/").json() == {"instances": None}
        assert c.get("/api/v1/instances/").json()["instances"] == []


def test_an_outbid_interruptible_instance_stops(sim: SimServer) -> None:
    offer = find_offer(sim)
    sim.market.set_faults(outbid_next=1, outbid_after_s=600)
    iid = rent(sim, offer["id"], price=offer["min_bid"])
    advance_until(sim, lambda: row(sim, iid)["actual_status"] == "running", step=30)
    assert row(sim, iid)["is_bid"] is True
    sim.market.advance(601)
    stopped = row(sim, iid)
    # It was not the renter who stopped it: it still means to run, and will
    # when its bid wins again.
    assert states(stopped) == ("stopped", "running", "stopped", "running")
    assert "outbid" in stopped["status_msg"]
    assert truth(sim, iid)["proofs_per_hour"] == 0


def test_bids_are_preempted_and_on_demand_never(sim: SimServer) -> None:
    sim.market.set_faults(outbid_rate_per_hour=4.0)
    bids = []
    for _ in range(3):
        offer = find_offer(sim)
        bids.append(rent(sim, offer["id"], price=offer["min_bid"]))
    steady = rent(sim, find_offer(sim)["id"])
    seen: dict[int, set[str]] = {i: set() for i in [*bids, steady]}
    for _ in range(4 * 60 // 5):
        sim.market.advance(300)
        for shown in sim.market.state()["instances"]:
            seen[shown["id"]].add(str(shown["actual_status"]))
    assert all("stopped" in seen[i] for i in bids), seen
    assert "stopped" not in seen[steady] and "running" in seen[steady]


def test_state_does_not_depend_on_how_often_anyone_looks() -> None:
    def market() -> tuple[Market, list[int]]:
        m = Market(seed=8, speed=0, scenario_name="chaos", offer_count=300, start_epoch=1.8e9)
        m.set_faults(offer_taken_rate=0.0, outbid_rate_per_hour=1.0, reboot_rate_per_hour=0.5)
        ids = []
        usable = {"rentable": {"eq": True}, "disk_space": {"gte": 100}, "limit": 6}
        for offer in m.search_offers(usable):
            body = {"image": "img", "disk": 80, "runtype": "args", "price": offer["min_bid"]}
            ids.append(m.rent(offer["id"], body).instance_id)
        return m, ids

    def picture(m: Market) -> list[tuple[Any, ...]]:
        keys = (*STATE, "status_msg", "proofs_completed", "prover_phase", "prover_error")
        return [tuple(i[k] for k in keys) for i in m.state()["instances"]]

    once, ids = market()
    often, same = market()
    assert ids == same
    once.advance(8 * 3600)
    for _ in range(8 * 60):
        often.advance(60)
        often.state()  # every look advances every machine
    assert picture(once) == picture(often)
    assert len({p[0] for p in picture(once)}) > 1, "chaos should have hit something"
