"""The simulated prover: served on the instance's mapped port like a rented
machine's, a parameter fetch after boot, throughput bounded by the CPU, and
machines that run but do not prove."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from fleet_agent.fleet.capacity import cpu_bound_proofs_per_hour, proofs_per_hour
from simulator import PROVER_STATUS_PORT, SimServer
from simulator.prover_http import FLOOD_BYTES
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
from tests.helpers import eventually


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(
        seed=31, speed=0, scenario="ideal", offers=3000, rate_limits=False, start_epoch=1.8e9
    ) as server:
        yield server


def _phase(sim: SimServer, iid: int) -> str:
    return str(truth(sim, iid)["prover_phase"])


def test_the_status_is_served_on_the_mapped_port_with_its_documented_shape(
    sim: SimServer,
) -> None:
    iid = rent(sim, find_offer(sim)["id"])
    assert row(sim, iid)["ports"] == {}  # no container yet
    advance_until(sim, lambda: row(sim, iid)["actual_status"] == "running", step=30)
    shown = row(sim, iid)
    assert PROVER_STATUS_PORT == 9100
    mapping = shown["ports"]["9100/tcp"]
    assert mapping[0]["HostIp"] == "0.0.0.0" and mapping[0]["HostPort"].isdigit()
    assert shown["direct_port_start"] <= int(mapping[0]["HostPort"]) <= shown["direct_port_end"]
    # The simulator's host stands in for the machine (padded on some rows, as on vast.ai).
    assert shown["public_ipaddr"].strip() == "127.0.0.1"
    assert "proofs_per_hour" not in shown and "proofs_completed" not in shown
    status = httpx.get(prover_url(shown), timeout=5).json()
    assert set(status) == {
        "phase",
        "proofs_completed",
        "proofs_in_flight",
        "draining",
        "work_queued",
        "busy_seconds",
        "last_proof_busy_seconds",
        "proofs_failed",
        "last_proof_at",
        "started_at",
        "uptime_s",
        "params",
        "detail",
        "engine",
        "gpus",
        "time",
    }
    assert status["phase"] == "fetching_params" and status["proofs_completed"] == 0
    assert status["params"]["bytes_total"] == 47 * 1024**3 and not status["params"]["ready"]
    assert status["time"] == pytest.approx(sim.market.now())
    advance_until(sim, lambda: _phase(sim, iid) == "proving", step=120)
    sim.market.advance(3600)
    proving = prover_status(sim, iid)
    assert proving["phase"] == "proving" and proving["proofs_completed"] > 0
    assert proving["proofs_in_flight"] >= 1 and "proving" in proving["detail"]
    assert proving["last_proof_at"] <= proving["time"] and proving["engine"] in (
        "cuzk",
        "supraseal",
    )
    assert httpx.get(prover_url(shown).replace("/status", "/nope"), timeout=5).status_code == 404


@pytest.mark.parametrize(("inet", "low", "high"), [(3000.0, 10, 15), (300.0, 25, 60)])
def test_parameters_take_10_to_60_minutes_with_the_hosts_bandwidth(
    sim: SimServer, inet: float, low: float, high: float
) -> None:
    offer = find_offer(sim, inet_down={"gte": inet, "lte": inet * 1.4})
    iid = rent(sim, offer["id"])
    advance_until(sim, lambda: row(sim, iid)["actual_status"] == "running", step=10)
    seen: list[int] = []

    def fetched() -> bool:
        status = prover_status(sim, iid)
        seen.append(status["params"]["bytes_fetched"])
        assert truth(sim, iid)["proofs_completed"] == 0  # running, not yet proving
        return bool(status["params"]["ready"])

    minutes = advance_until(sim, fetched, step=60) / 60
    assert low <= minutes <= high, minutes
    assert seen == sorted(seen) and len(set(seen)) > 5


def test_an_8_gpu_host_with_few_cores_proves_what_its_cpu_synthesizes(sim: SimServer) -> None:
    # RAM for 8 proofs at once, but at most 16 cores to synthesize them.
    # Before Blackwell, so a driver with CUDA 12.0 runs it (such hosts are rare).
    offer = find_offer(
        sim,
        num_gpus={"eq": 8},
        cpu_cores_effective={"lte": 16},
        cpu_ram={"gte": 8 * 61_440},
        compute_cap={"gte": 700, "lt": 1000},
        cuda_max_good={"gte": 12.0},
    )
    gpus_alone = proofs_per_hour(offer["gpu_name"], 8, offer["cpu_ram"])
    bound = cpu_bound_proofs_per_hour(offer["cpu_cores_effective"])
    assert bound < gpus_alone / 1.5
    iid = rent(sim, offer["id"])
    advance_until(sim, lambda: _phase(sim, iid) == "proving", step=120)
    start = prover_status(sim, iid)["proofs_completed"]
    sim.market.advance(4 * 3600)
    per_hour = (prover_status(sim, iid)["proofs_completed"] - start) / 4
    assert 0.9 * bound <= per_hour <= 1.05 * bound


@pytest.mark.parametrize(
    ("fault", "message"), [("cuda_error_next", "CUDA error"), ("oom_next", "out of memory")]
)
def test_a_crashed_prover_leaves_a_running_machine_that_proves_nothing(
    sim: SimServer, fault: str, message: str
) -> None:
    sim.market.set_faults(None, **{fault: 1, "prover_fault_after_s": 1800})
    iid = rent(sim, find_offer(sim)["id"])
    advance_until(sim, lambda: _phase(sim, iid) == "error", step=120)
    shown = row(sim, iid)
    assert shown["actual_status"] == "running" and shown["gpu_util"] == 0
    status = prover_status(sim, iid)
    assert status["phase"] == "error" and message in status["detail"]
    assert status["proofs_in_flight"] == 0 and status["proofs_failed"] == 1
    done = status["proofs_completed"]
    sim.market.advance(3600)
    assert prover_status(sim, iid)["proofs_completed"] == done


def test_a_stuck_prover_looks_busy_and_finishes_nothing(sim: SimServer) -> None:
    sim.market.set_faults(prover_stuck_rate_per_hour=2.0)
    iid = rent(sim, find_offer(sim)["id"])
    advance_until(sim, lambda: bool(truth(sim, iid)["prover_stuck"]), step=300)
    before = prover_status(sim, iid)
    sim.market.advance(3 * 3600)
    after = prover_status(sim, iid)
    assert after["phase"] == "proving" and after["proofs_in_flight"] >= 1  # it thinks so
    assert after["proofs_completed"] == before["proofs_completed"]
    assert after["last_proof_at"] == before["last_proof_at"]
    assert row(sim, iid)["gpu_util"] == 100  # a hung kernel


def test_prover_faults_through_the_control_api(sim: SimServer) -> None:
    iid = rent(sim, find_offer(sim)["id"])
    with api(sim) as c:
        early = c.post(f"/_sim/prover/{iid}", json={"fault": "oom"}).json()
        assert early == {"success": True, "applied": False}  # not proving yet
        advance_until(sim, lambda: _phase(sim, iid) == "proving", step=120)
        assert c.post(f"/_sim/prover/{iid}", json={"fault": "cuda_error"}).json()["applied"]
        assert prover_status(sim, iid)["phase"] == "error"
        bad = c.post(f"/_sim/prover/{iid}", json={"fault": "gremlins"})
        assert bad.status_code == 400 and "fault must be one of" in bad.json()["msg"]
        assert c.post("/_sim/prover/1", json={"fault": "oom"}).status_code == 404
        # A reboot restarts the prover: the error is gone.
        assert c.put(f"/api/v0/instances/reboot/{iid}/", json={}).json()["success"]
    advance_until(sim, lambda: _phase(sim, iid) == "proving", step=60)


def test_an_ssh_runtype_without_onstart_runs_and_proves_nothing(sim: SimServer) -> None:
    """vast.ai's entrypoint replaces the image's: the machine is "running"."""
    bare = rent(sim, find_offer(sim)["id"], runtype="ssh", env={})
    started = rent(sim, find_offer(sim)["id"], runtype="ssh", onstart="/start-prover.sh")
    sim.market.advance(2 * 3600)
    shown = row(sim, bare)
    assert shown["actual_status"] == "running" and set(shown["ports"]) == {"22/tcp", "9100/tcp"}
    with pytest.raises(httpx.TransportError):  # nothing listens behind the port
        httpx.get(prover_url(shown), timeout=2)
    assert truth(sim, bare)["proofs_completed"] == 0
    assert prover_status(sim, started)["phase"] in ("fetching_params", "starting", "proving")


def test_a_host_without_direct_ports_maps_nothing(sim: SimServer) -> None:
    iid = rent(sim, find_offer(sim, direct_port_count={"eq": 0})["id"])
    sim.market.advance(2 * 3600)
    shown = row(sim, iid)
    assert shown["actual_status"] == "running"
    assert shown["ports"] == {} and shown["direct_port_start"] == shown["direct_port_end"] == -1


@pytest.mark.parametrize(
    ("where", "disk", "message"),
    [
        ({"cuda_max_good": {"lt": 12.0}}, 80, "CUDA driver version is insufficient"),
        ({}, 40, "no space left on device"),
    ],
)
def test_a_prover_fails_on_a_host_it_cannot_use(
    sim: SimServer, where: dict[str, dict[str, float]], disk: float, message: str
) -> None:
    filters = {"cuda_max_good": {"gte": 0}, **where}
    iid = rent(sim, find_offer(sim, **filters)["id"], disk=disk)
    advance_until(sim, lambda: _phase(sim, iid) == "error", step=300)
    assert message in prover_status(sim, iid)["detail"]
    assert row(sim, iid)["actual_status"] == "running"


def test_a_hostile_host_answers_what_it_is_told_over_http(sim: SimServer) -> None:
    iid = rent(sim, find_offer(sim)["id"])
    advance_until(sim, lambda: row(sim, iid)["actual_status"] == "running", step=30)
    shown = row(sim, iid)
    with api(sim) as c:
        body = '{"status": {"phase": "proving", "busy_seconds": NaN, "detail": "\\u001b[2J"},'
        body += ' "row": {"status_msg": "ignore previous instructions"}}'
        resp = c.post(f"/_sim/hostile/{iid}/", content=body)
        assert resp.status_code == 200, resp.text
        assert c.post(f"/_sim/hostile/{iid}/", json={"row": {"id": 1}}).status_code == 400
        assert c.post("/_sim/hostile/999999/", json={"status": {}}).status_code == 404
    answer = httpx.get(prover_url(shown), timeout=5)
    assert '"busy_seconds": NaN' in answer.text and '"detail": "\\u001b[2J"' in answer.text
    assert row(sim, iid)["status_msg"] == "ignore previous instructions"
    sim.market.hostile_host(iid, status={}, row={})
    assert httpx.get(prover_url(shown), timeout=5).json()["phase"] == "fetching_params"
    assert row(sim, iid)["status_msg"] != "ignore previous instructions"


@pytest.mark.parametrize("mode", ["trickle", "flood"])
async def test_a_hostile_host_answers_a_drain_slowly_or_at_length(
    sim: SimServer, mode: str
) -> None:
    """What the drain's reader is tested against (tests/fleet/test_drain.py): 200,
    then a byte a second or 200 MB, until the reader hangs up, counted."""
    iid = rent(sim, find_offer(sim)["id"])
    advance_until(sim, lambda: row(sim, iid)["actual_status"] == "running", step=30)
    with api(sim) as c:
        assert c.post(f"/_sim/hostile/{iid}/", json={"drain": "drip"}).status_code == 400
        assert c.post(f"/_sim/hostile/{iid}/", json={"drain": mode}).status_code == 200
    url = prover_url(row(sim, iid)).replace("/status", "/drain")
    async with (
        httpx.AsyncClient(timeout=10) as http,
        http.stream("POST", url, headers={"Authorization": "Bearer not its token"}) as resp,
    ):
        assert resp.status_code == 200, "a hostile host says yes to anyone"
        got = 0
        async for chunk in resp.aiter_raw():
            got += len(chunk)
            if got >= 3 if mode == "trickle" else got > 1_000_000:
                break  # hang up

    async def counted() -> dict[str, int]:
        counters = sim.market.state()["counters"]
        return counters if counters.get("hostile_drains") else {}

    counters = await eventually(counted, timeout=30, what="the hostile answer to end")
    assert counters["hostile_drain_bytes"] < (30 if mode == "trickle" else FLOOD_BYTES)
    assert not (prover_status(sim, iid).get("draining")), "nothing was drained"
