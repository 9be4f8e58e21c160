"""The simulator's demand on real rented machines (issue 45): provers pull
work with deadlines over the market's own lifecycle, give it back when
destroyed, sit idle when there is none, and ``GET /demand`` serves the
queue to the agent's generic demand adapter over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest

from fleet_agent.fleet.prover_status import parse_status
from fleet_agent.fleet.provers import ProverTrack, advance
from simulator import DemandConfig, SimServer
from testkit.sim_helpers import advance_until, api, find_offer, prover_status, rent, truth


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(
        seed=31, speed=0, scenario="ideal", offers=3000, rate_limits=False, start_epoch=1.8e9
    ) as server:
        yield server


def _proving(sim: SimServer) -> int:
    iid = rent(sim, find_offer(sim)["id"])
    advance_until(sim, lambda: truth(sim, iid)["prover_phase"] == "proving", step=120)
    return iid


def _demand(sim: SimServer) -> dict[str, Any]:
    state = sim.market.state()["demand"]
    assert state is not None
    assert (
        state["arrived"] == state["done"] + state["expired"] + state["queued"] + state["in_flight"]
    )
    return dict(state)


def test_one_prover_keeps_up_with_light_demand_and_falls_behind_heavy_demand(
    sim: SimServer,
) -> None:
    iid = _proving(sim)
    rate = truth(sim, iid)["proofs_per_hour"]
    assert 10 < rate < 40, rate
    sim.market.set_demand(DemandConfig(curve=((0.0, rate / 3),)))
    sim.market.advance(4 * 3600)
    light = _demand(sim)
    assert light["done"] > 20 and light["late"] == light["expired"] == 0
    assert light["idle_machine_seconds"] > 3600  # a third busy, two thirds idle
    sim.market.set_demand(DemandConfig(curve=((0.0, rate * 3),)))
    sim.market.advance(3 * 3600)
    heavy = _demand(sim)
    assert heavy["late"] + heavy["expired"] > 10
    assert heavy["queued"] > 10


def test_a_destroyed_prover_gives_its_work_back_to_the_queue(sim: SimServer) -> None:
    first = _proving(sim)
    sim.market.set_demand(DemandConfig(curve=((0.0, 600.0),)))
    advance_until(sim, lambda: _demand(sim)["in_flight"] == 1)
    before = _demand(sim)
    with api(sim) as c:
        assert c.delete(f"/api/v0/instances/{first}/").status_code == 200
    sim.market.advance(120)
    after = _demand(sim)
    assert after["returned"] == 1 and after["in_flight"] == 0
    assert after["queued"] > before["queued"]
    # A new prover proves it: nothing lost, all counted.
    second = _proving(sim)
    advance_until(sim, lambda: _demand(sim)["done"] > before["done"] + 5)
    assert truth(sim, second)["prover_phase"] == "proving"


def test_a_prover_with_no_demand_reports_idle_over_its_port(sim: SimServer) -> None:
    iid = _proving(sim)
    sim.market.set_demand(DemandConfig(curve=((0.0, 0.0),)))
    track: ProverTrack | None = None
    for _ in range(30):
        sim.market.advance(120)
        track = advance(track, parse_status(prover_status(sim, iid)), iid, sim.market.now(), 20.0)
    status = prover_status(sim, iid)
    assert (status["proofs_in_flight"], status["work_queued"]) == (0, 0)
    assert status["proofs_completed"] == 0 and status["phase"] == "proving"
    assert track is not None and track.idle
    # Work comes: the same port shows it held, then proved.
    sim.market.set_demand(DemandConfig(curve=((0.0, 600.0),)))
    sim.market.advance(600)
    status = prover_status(sim, iid)
    assert status["proofs_in_flight"] == 1 and status["proofs_completed"] > 0


def _rfc3339(text: str) -> float:
    assert text.endswith("Z"), text
    return datetime.fromisoformat(text).timestamp()


def test_the_demand_endpoint_serves_the_queue_over_http(sim: SimServer) -> None:
    with httpx.Client(base_url=sim.url, timeout=10) as c:
        assert c.get("/demand").status_code == 404  # nothing configured yet
        bad = c.post("/_sim/demand", json={"curve": [[30, 1]]})
        assert bad.status_code == 400 and "curve" in bad.json()["msg"]
        resp = c.post(
            "/_sim/demand",
            json={"curve": [[0, 900]], "deadline_minutes": 20, "events": ["09:00-10:00x2"]},
        )
        assert resp.status_code == 200, resp.text
        assert resp.json()["demand"]["config"]["deadline_minutes"] == 20
        sim.market.advance(1800)  # no prover: it all waits
        body = c.get("/demand").json()
        assert set(body) == {
            "as_of",
            "queued",
            "in_flight",
            "arrived_total",
            "done_total",
            "late_total",
            "deadlines",
            "saturated",
        }
        assert body["queued"] == body["arrived_total"] > 300
        assert (body["in_flight"], body["done_total"], body["saturated"]) == (0, 0, False)
        assert _rfc3339(body["as_of"]) == pytest.approx(sim.market.now(), abs=60)
        deadlines = [_rfc3339(d) for d in body["deadlines"]]
        assert len(deadlines) == body["queued"] and deadlines == sorted(deadlines)
        assert deadlines[0] > sim.market.now() - 1800 + 20 * 60 - 60
        # Twice the deadline on: the oldest expire, and count as missed.
        sim.market.advance(1800)
        body = c.get("/demand/").json()
        assert body["late_total"] > 0
        # The curve is replaced at run time; the other settings stay.
        resp = c.post("/_sim/demand", json={"curve": [[0, 0]]})
        assert resp.json()["demand"]["config"]["deadline_minutes"] == 20
        assert resp.json()["demand"]["rate_now"] == 0
        arrived = body["arrived_total"]
        sim.market.advance(600)
        assert c.get("/demand").json()["arrived_total"] == arrived
        assert c.post("/_sim/demand", json={"enabled": False}).json()["demand"] is None
        assert c.get("/demand").status_code == 404
