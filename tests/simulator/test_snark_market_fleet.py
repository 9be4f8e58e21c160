"""The operator's node proving on the agent's fleet (simulator/snark_market/fleet_prover.py):
a job takes its machine's proof time (a Snap 1.6 times it) and fails when the
machine stops holding it; on a real simulator the node proves on machines
rented over its HTTP API, a destroyed machine's jobs are retried on another,
no machine means rows that wait, a seed gives one history however the clock
is stepped, and the vast market and the Curio stand-in share one lock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from simulator import DemandConfig, SimServer
from simulator.curio.address import key_address
from simulator.curio.fil import ATTO_PER_NFIL
from simulator.snark_market import FleetProver, MarketConfig, ProofJob, SnarkMarket
from simulator.snark_market.events import Scheduler
from simulator.work_queue import MachineView
from testkit.sim_helpers import (
    PROVER_HOST,
    advance_until,
    api,
    find_offer,
    prover_status,
    rent,
    truth,
)

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
WALLET = key_address("operator")
PRICE_ATTO = 5_000_000 * ATTO_PER_NFIL  # 0.005 FIL/P


# ------------------------------------------------------------------ pure


def _view(mid: int = 1, **kw: Any) -> MachineView:
    fields: dict[str, Any] = {
        "id": mid,
        "holds": True,
        "pulls": True,
        "stuck": False,
        "slots": 2,
        "seconds_per_proof": 100.0,
        "started_at": 50.0,
    }
    fields.update(kw)
    return MachineView(**fields)


class _Fleet:
    """Views a test changes between events."""

    def __init__(self, *views: MachineView) -> None:
        self.views = {v.id: v for v in views}
        self.asked: list[float] = []

    def __call__(self, t: float) -> list[MachineView]:
        self.asked.append(t)
        return list(self.views.values())


def _prover(fleet: _Fleet) -> tuple[FleetProver, Scheduler, list[tuple[float, str, bool]]]:
    sched = Scheduler(0.0)
    ends: list[tuple[float, str, bool]] = []
    prover = FleetProver(fleet)
    prover.attach(sched, lambda job, ok: ends.append((sched.now, job.request_cid, ok)))
    return prover, sched, ends


def test_a_job_takes_its_machines_proof_time_and_a_snap_1_6_times_it() -> None:
    fleet = _Fleet(_view(1, slots=2, seconds_per_proof=100.0), _view(2, slots=1, pulls=False))
    prover, sched, ends = _prover(fleet)
    assert prover.free() == 2  # machine 2 holds its work but takes none
    prover.start(ProofJob("porep", "porep", 1))
    prover.start(ProofJob("snap", "snap", 2))
    assert prover.free() == 0
    sched.run_until(1000.0)
    assert ends == [(100.0, "porep", True), (160.0, "snap", True)]
    assert prover.prover_fields(1, 50.0) == {
        "proofs_completed": 2,
        "proofs_in_flight": 0,
        "work_queued": 0,
        "busy_seconds": 130.0,  # (100 + 160) s over 2 slots
        "last_proof_busy_seconds": 130.0,
        "last_proof_at": 160.0,
    }
    # Every look at the fleet is at an event's time.
    assert set(fleet.asked) <= {0.0, 100.0, 160.0} | {10.0 * k for k in range(101)}


def test_a_job_goes_to_the_machine_with_most_room() -> None:
    fleet = _Fleet(_view(1, slots=1), _view(2, slots=3))
    prover, _, _ = _prover(fleet)

    def placed() -> dict[int, int]:
        return {m: prover.prover_fields(m, 50.0)["proofs_in_flight"] for m in (1, 2)}

    prover.start(ProofJob("r1", "porep", 1))
    assert placed() == {1: 0, 2: 1}
    prover.start(ProofJob("r2", "porep", 2))
    prover.start(ProofJob("r3", "porep", 3))  # a tie: the lowest id
    assert placed() == {1: 1, 2: 2}
    prover.start(ProofJob("r4", "porep", 4))
    assert prover.free() == 0
    with pytest.raises(RuntimeError, match="no machine"):
        prover.start(ProofJob("r5", "porep", 5))


@pytest.mark.parametrize(
    "change",
    [
        {"holds": False, "pulls": False},  # destroyed, stopped, dead, failed, frozen
        {"started_at": 75.0},  # its prover restarted: a new process holds nothing
        "gone",  # dropped from the market
    ],
)
def test_a_machine_that_stops_holding_its_work_fails_its_jobs(change: Any) -> None:
    fleet = _Fleet(_view(1, slots=2))
    prover, sched, ends = _prover(fleet)
    prover.start(ProofJob("a", "porep", 1))
    sched.run_until(35.0)
    if change == "gone":
        del fleet.views[1]
    else:
        fleet.views[1] = fleet.views[1]._replace(**change)
    sched.run_until(1000.0)
    assert ends == [(40.0, "a", False)]  # the next check after the loss
    assert (prover.proved, prover.failed) == (0, 1)


def test_a_stuck_machine_holds_its_jobs_until_it_is_lost() -> None:
    fleet = _Fleet(_view(1))
    prover, sched, ends = _prover(fleet)
    prover.start(ProofJob("a", "porep", 1))
    fleet.views[1] = fleet.views[1]._replace(stuck=True, pulls=False)
    sched.run_until(5000.0)
    assert ends == [] and prover.prover_fields(1, 50.0)["proofs_in_flight"] == 1
    assert prover.free() == 0
    fleet.views[1] = fleet.views[1]._replace(holds=False)
    sched.run_until(5010.0)
    assert ends == [(5010.0, "a", False)]


def test_the_fleet_prover_is_only_made_with_a_vast_market() -> None:
    with pytest.raises(ValueError, match="SimServer"):
        SnarkMarket(MarketConfig(prover="fleet"), clock=lambda: T0)
    with pytest.raises(ValueError, match="one work source"):
        SimServer(
            seed=1,
            speed=0,
            offers=50,
            demand=DemandConfig(curve=((0.0, 10.0),)),
            snark_market=MarketConfig(prover="fleet"),
        )


# ------------------------------------------------------- on the simulator


def _sim(seed: int = 31, **settings: Any) -> SimServer:
    config = MarketConfig(**{"prover": "fleet", "node_challenges": 500, **settings})
    return SimServer(
        seed=seed,
        speed=0,
        scenario="ideal",
        offers=3000,
        rate_limits=False,
        start_epoch=T0,
        snark_market=config,
    )


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with _sim() as server:
        assert server.snark_market is not None
        server.snark_market.set_meta(True, WALLET, PRICE_ATTO)
        yield server


def _market(sim: SimServer) -> SnarkMarket:
    assert sim.snark_market is not None
    return sim.snark_market


def _fleet(sim: SimServer) -> dict[str, Any]:
    report = _market(sim).report()["node"]["fleet"]
    assert report is not None
    return dict(report)


def _proving(sim: SimServer) -> int:
    iid = rent(sim, find_offer(sim)["id"])
    advance_until(sim, lambda: truth(sim, iid)["prover_phase"] == "proving", step=120)
    return iid


def test_without_machines_nothing_is_proved_and_the_rows_wait(sim: SimServer) -> None:
    sim.market.advance(1800)
    node = _market(sim).report()["node"]
    assert _fleet(sim) == {"machines": [], "free": 0, "proved": 0, "failed": 0}
    assert node["rows"] == node["queue_count"] == 8  # the high water mark, all waiting
    assert not any(r.owned or r.compute_done for r in _market(sim).node.rows)


def test_the_node_proves_on_a_rented_machine(sim: SimServer) -> None:
    iid = _proving(sim)
    sim.market.advance(3600)
    fleet = _fleet(sim)
    (machine,) = fleet["machines"]
    expected = truth(sim, iid)["expected_proofs_per_hour"]
    assert machine["id"] == iid and machine["takes_work"]
    # The capacity model's time per proof: 3600 x slots / proofs per hour.
    assert machine["seconds_per_proof"] == pytest.approx(
        3600 * machine["slots"] / expected, rel=1e-3
    )
    assert fleet["proved"] > 10 and fleet["failed"] == 0
    node = _market(sim).node
    assert node.counters.submitted > 0 and node.payments, "the market paid the node"
    # The machine's own status port reports the node's work on it.
    status = prover_status(sim, iid)
    assert status["proofs_completed"] == machine["done"] == fleet["proved"]
    assert status["proofs_in_flight"] == machine["running"]


def test_a_destroyed_machines_jobs_are_retried_on_another(sim: SimServer) -> None:
    machines = [rent(sim, offer["id"]) for offer in _offers(sim, 2)]
    advance_until(
        sim, lambda: all(truth(sim, i)["prover_phase"] == "proving" for i in machines), step=120
    )
    sim.market.advance(600)

    def busy() -> int | None:
        return next((m["id"] for m in _fleet(sim)["machines"] if m["running"]), None)

    advance_until(sim, lambda: busy() is not None, step=5)
    lost = busy()
    (kept,) = set(machines) - {lost}
    before = _fleet(sim)
    with api(sim) as c:
        assert c.delete(f"/api/v0/instances/{lost}/").status_code == 200
    sim.market.advance(20)  # the next check ends its jobs
    after = _fleet(sim)
    assert after["failed"] > before["failed"] == 0
    node = _market(sim).node
    retried = {r.request_cid for r in node.rows if r.retries > 0}
    assert retried and node.counters.prove_failures == after["failed"]
    # Harmony's wait (10 s x retries), then the machine that is left proves them.
    advance_until(
        sim, lambda: all(r.compute_done for r in node.rows if r.request_cid in retried), step=10
    )
    assert [m["id"] for m in _fleet(sim)["machines"]] == [kept]
    assert _fleet(sim)["failed"] == after["failed"]


def _offers(sim: SimServer, count: int) -> list[dict[str, Any]]:
    with api(sim) as c:
        body = {**PROVER_HOST, "order": [["dph_total", "asc"]], "limit": count}
        resp = c.post("/api/v0/bundles/", json=body)
    resp.raise_for_status()
    offers: list[dict[str, Any]] = resp.json()["offers"]
    assert len(offers) == count
    return offers


def _history(step: float, *, seed: int = 31) -> dict[str, Any]:
    """A day's first hours on a rented machine, the clock moved in `step`s."""
    with _sim(seed) as server:
        market = _market(server)
        market.set_meta(True, WALLET, PRICE_ATTO)
        iid = rent(server, find_offer(server)["id"])
        end = server.market.now() + 3 * 3600
        while server.market.now() < end:
            server.market.advance(min(step, end - server.market.now()))
            if step < 3600:
                # A reader between steps: every machine advanced to now.
                truth(server, iid)
        report = market.report()
        rows = [(r.request_cid, r.retries, r.compute_done) for r in market.node.rows]
        return {"report": report, "rows": rows, "machine": truth(server, iid)["prover_phase"]}


def test_a_seed_gives_one_history_whatever_the_clock_steps() -> None:
    whole = _history(3 * 3600)
    assert whole["machine"] == "proving" and whole["report"]["node"]["fleet"]["proved"] > 10
    assert _history(30) == whole
    assert _history(3 * 3600, seed=32)["report"] != whole["report"]


def test_the_two_markets_share_one_lock_and_answer_together() -> None:
    """The HTTP threads call both markets: one lock, so no order to deadlock on."""
    with SimServer(
        seed=3,
        speed=600,
        scenario="ideal",
        offers=300,
        rate_limits=False,
        snark_market=MarketConfig(prover="fleet", node_challenges=500),
    ) as server:
        market = _market(server)
        assert market.lock is server.market.lock
        market.set_meta(True, WALLET, PRICE_ATTO)
        rent(server, find_offer(server)["id"])
        failures: list[BaseException] = []

        def hammer(url: str, headers: dict[str, str]) -> None:
            try:
                with httpx.Client(timeout=20, headers=headers) as c:
                    for _ in range(40):
                        c.get(url).raise_for_status()
            except BaseException as exc:  # reported below, in the test's thread
                failures.append(exc)

        auth = {"Authorization": f"Bearer {server.api_key}"}
        threads = [
            threading.Thread(target=hammer, args=(f"{server.url}/api/v1/instances/", auth)),
            threading.Thread(target=hammer, args=(f"{server.curio_url}/_sim/snark-market", {})),
            threading.Thread(target=hammer, args=(f"{server.curio_url}/debug/metrics", {})),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads), "a thread is stuck: a lock order"
        assert not failures, failures
