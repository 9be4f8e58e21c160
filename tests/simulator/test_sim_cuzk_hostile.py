"""Hostile hosts in router mode: the control API (``POST /_sim/cuzk/{id}``)
turns a machine's cuzk into a liar, a source of bad proofs, a trickler, a
slow prover or one that dies mid-proof (simulator/cuzk_machine.py), at once
and on a running cuzk; the truth (``GET /_sim/cuzk``) says what really
happened. Also: a stuck prover holds its proofs, and a restarted simulator
serves its machines' fronts again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import grpc
import grpc.aio
import pytest

from fleet_agent.cuzk.credentials import Authority
from fleet_agent.cuzk.service import ProvingEngineStub, pb
from simulator import SimServer, snark
from simulator.curio import sample_porep
from simulator.cuzk import Behaviour, CuzkStandIn, StandInConfig, StandInEngine
from simulator.cuzk_hosts import CuzkHosts, _Host
from simulator.cuzk_market import CUZK_DEATH_MSG
from testkit.sim_helpers import api, find_offer, rent, row
from tests.helpers import eventually
from tests.helpers.sim_cuzk import (
    DROPPED,
    RouterMachine,
    boot,
    cuzk_truth,
    front_address,
    preload,
    start_proof,
)

LABEL = "fleet-agent/main/r7-hostile0000"


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(seed=53, speed=0, scenario="ideal", offers=500, rate_limits=False) as server:
        yield server


async def _prove(m: RouterMachine, req: pb.SubmitProofRequest) -> pb.AwaitProofResponse:
    async with m.channel() as channel:
        answer = await ProvingEngineStub(channel).Prove(pb.ProveRequest(submit=req), timeout=10)
    return answer.result


async def test_a_bad_host_answers_completed_with_proofs_that_do_not_verify(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    sim.market.set_speed(20_000)
    m.behave("bad")
    req = sample_porep(1)
    result = await _prove(m, req)
    assert result.status == pb.AwaitProofResponse.COMPLETED
    assert len(result.proof) == snark.PROOF_BYTES and not snark.verify(req, result.proof)
    t = cuzk_truth(sim, m.instance_id)
    assert t["bad_proofs"] == 1 and t["proofs_completed"] == 1
    assert t["proofs_per_hour"] == 0 < t["capacity_per_hour"]
    m.behave("honest")
    req = sample_porep(2)
    assert snark.verify(req, (await _prove(m, req)).proof)
    assert cuzk_truth(sim, m.instance_id)["bad_proofs"] == 1


async def test_a_lying_host_claims_gpus_and_totals_it_has_not(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    m.behave("lies")
    async with m.channel() as channel:
        status = await ProvingEngineStub(channel).GetStatus(pb.GetStatusRequest(), timeout=5)
    assert len(status.gpus) == 64 and status.total_proofs_completed == 10**12
    t = cuzk_truth(sim, m.instance_id)
    assert t["gpus"] == m.offer["num_gpus"] < 64 and t["proofs_completed"] == 0


async def test_a_host_that_dies_drops_the_proof_and_its_machine_exits(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    sim.market.set_speed(20_000)
    m.behave("dies", after_proofs=1)
    assert snark.verify(sample_porep(1), (await _prove(m, sample_porep(1))).proof)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await _prove(m, sample_porep(2))
    assert info.value.code() in DROPPED
    shown = await eventually(lambda: row(sim, m.instance_id)["actual_status"] == "exited" and True)
    assert shown and row(sim, m.instance_id)["status_msg"].strip() == CUZK_DEATH_MSG
    t = cuzk_truth(sim, m.instance_id)
    assert t["proofs_completed"] == 1 and not t["serving"] and t["proofs_per_hour"] == 0
    assert sim.market.state()["counters"]["cuzk_deaths"] == 1


async def test_a_trickling_host_answers_late_and_never_proves(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    m.behave("trickle", trickle_s=30)
    async with m.channel() as channel:
        stub = ProvingEngineStub(channel)
        status = asyncio.create_task(stub.GetStatus(pb.GetStatusRequest(), timeout=5))
        await asyncio.sleep(0.3)
        assert not status.done()  # 30 sim seconds, and the clock stands still
        sim.market.advance(31)
        await asyncio.wait_for(status, 5)
        sim.market.set_speed(20_000)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Prove(pb.ProveRequest(submit=sample_porep(1)), timeout=1)
        assert info.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        sim.market.set_speed(0)
    assert cuzk_truth(sim, m.instance_id)["proofs_per_hour"] == 0


async def test_a_slow_host_takes_its_factor_times_as_long(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    t = cuzk_truth(sim, m.instance_id)
    seconds = t["seconds_per_proof"]["porep-c2"]
    m.behave("slow", slow_factor=2)
    assert cuzk_truth(sim, m.instance_id)["proofs_per_hour"] == pytest.approx(
        t["capacity_per_hour"] / 2, abs=0.01
    )
    async with m.channel() as channel:
        stub = ProvingEngineStub(channel)
        await preload(sim, stub)
        task = await start_proof(stub, sample_porep(1))
        sim.market.advance(seconds * 2 - 2)
        await asyncio.sleep(0.3)
        assert not task.done()
        sim.market.advance(3)
        await asyncio.wait_for(task, 5)


async def test_a_stuck_prover_holds_its_proof_and_still_answers(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    async with m.channel() as channel:
        stub = ProvingEngineStub(channel)
        await preload(sim, stub)
        with api(sim) as c:
            c.post(f"/_sim/prover/{m.instance_id}", json={"fault": "stuck"}).raise_for_status()
        await eventually(lambda: cuzk_truth(sim, m.instance_id)["proofs_per_hour"] == 0)
        task = await start_proof(stub, sample_porep(1))
        sim.market.advance(3600)
        await asyncio.sleep(0.3)
        assert not task.done(), "a stuck prover finished a proof"
        await stub.GetStatus(pb.GetStatusRequest(), timeout=2)  # it answers
        task.cancel()


def test_the_control_api_checks_what_it_is_asked(sim: SimServer, authority: Authority) -> None:
    m = boot(sim, authority, LABEL, serve=False)
    plain = rent(sim, find_offer(sim)["id"])
    with api(sim) as c:
        url = f"/_sim/cuzk/{m.instance_id}"
        assert c.post(url, json={"behaviour": "evil"}).status_code == 400
        assert c.post(url, json={"behaviour": "slow", "slow_factor": 0.5}).status_code == 400
        assert c.post(url, json={"behaviour": "dies", "after_proofs": -1}).status_code == 400
        assert c.post(url, json={"behaviour": "bad", "extra": 1}).status_code == 400
        assert c.post(url, json=["bad"]).status_code == 400
        assert c.post(f"/_sim/cuzk/{plain}", json={"behaviour": "bad"}).status_code == 400
        assert c.post("/_sim/cuzk/1", json={"behaviour": "bad"}).status_code == 404
        answer = c.post(url, json={"behaviour": "dies"})
        assert answer.json() == {"success": True, "behaviour": {"mode": "dies", "after_proofs": 0}}


async def test_a_restarted_simulator_serves_its_machines_fronts_again(
    tmp_path: Path, authority: Authority
) -> None:
    state = tmp_path / "sim.json"
    options = {"seed": 54, "speed": 0, "scenario": "ideal", "offers": 500, "rate_limits": False}
    with SimServer(state_path=state, **options) as first:  # type: ignore[arg-type]
        m = boot(first, authority, LABEL)
        first.market.set_speed(20_000)
        m.behave("bad")
        req = sample_porep(1)
        assert not snark.verify(req, (await _prove(m, req)).proof)
    with SimServer(state_path=state, **options) as second:  # type: ignore[arg-type]
        assert second.restored
        address = front_address(row(second, m.instance_id))
        assert address == m.address  # its old port, free again
        again = RouterMachine(second, m.instance_id, LABEL, address, m.client, m.offer)
        second.market.set_speed(20_000)
        req = sample_porep(2)
        result = await eventually(lambda: _answer(again, req), timeout=10)
        assert not snark.verify(req, result.proof)  # still a bad host
        t = cuzk_truth(second, m.instance_id)
        assert t["proofs_completed"] == 2 and t["bad_proofs"] == 2


async def _answer(m: RouterMachine, req: pb.SubmitProofRequest) -> pb.AwaitProofResponse | None:
    try:
        return await _prove(m, req)
    except grpc.aio.AioRpcError:
        return None


def test_a_stale_reconcile_pass_does_not_undo_a_newer_behaviour() -> None:
    # A pass reads the market (revision 0), a control call then sets "bad"
    # (revision 1) on the running engine, and the pass applies what it read.
    host = _Host(1, 0, None, None, CuzkHosts("127.0.0.1"))
    engine = StandInEngine(StandInConfig())
    host.standin = cast(CuzkStandIn, SimpleNamespace(engine=engine))
    host.apply({"mode": "bad"}, 1)
    host.apply({"mode": "honest"}, 0)
    assert engine.config.behaviour.mode == "bad"
    host.apply({"mode": "dies", "after_proofs": 2}, 2)
    assert engine.config.behaviour == Behaviour(mode="dies", die_after_proofs=2)
