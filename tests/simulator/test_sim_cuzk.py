"""A simulated machine created in router mode serves cuzk behind the real TLS
front (simulator/cuzk_hosts.py, prover_image/front.py) on the host port its
row maps to 9821/tcp: only the router's client certificate gets in, only to
the machine it names; nothing listens until its parameters are fetched or
when its create's credentials would stop the real image; its proofs verify
and take the capacity model's time on the simulator's clock; it stops with
its machine (calls in flight fail), hangs while frozen, and the control API's
truth counts what it proved."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import grpc.aio
import pytest

from fleet_agent.cuzk.credentials import Authority, machine_env, server_name
from fleet_agent.cuzk.service import ProvingEngineStub, channel_options, pb
from simulator import SimServer, snark
from simulator.curio import sample_porep
from testkit.sim_helpers import advance_until, api, find_offer, rent, row, truth
from tests.helpers import eventually
from tests.helpers.sim_cuzk import (
    DROPPED,
    RouterMachine,
    boot,
    cuzk_truth,
    preload,
    refused,
    router_env,
    start_proof,
)

LABEL = "fleet-agent/main/r1-aaaaaaaaaa"
OTHER = "fleet-agent/main/r2-bbbbbbbbbb"


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(seed=52, speed=0, scenario="ideal", offers=500, rate_limits=False) as server:
        yield server


def _connect_refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


async def test_a_router_mode_machine_proves_behind_its_front(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL, serve=False, num_gpus={"gte": 2})
    # Running, still fetching the parameters: the port is mapped, nothing listens.
    assert truth(sim, m.instance_id)["prover_phase"] == "fetching_params"
    assert _connect_refused(m.address)
    advance_until(sim, lambda: cuzk_truth(sim, m.instance_id)["serving"], step=60)
    t = cuzk_truth(sim, m.instance_id)
    assert t["gpus"] == m.offer["num_gpus"] >= 2 and t["refusal"] is None
    async with m.channel() as channel:
        stub = ProvingEngineStub(channel)
        status = await stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        # cuzk loads circuits on demand (curio cuzk-core engine.rs: "no preload").
        assert len(status.gpus) == m.offer["num_gpus"] and not status.loaded_srs
        sim.market.set_speed(10_000)  # a PreloadSRS of 30-90 sim seconds
        loaded = await stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-32g"), timeout=5)
        assert not loaded.already_loaded and 30_000 <= loaded.load_time_ms <= 91_000
        status = await stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        assert [s.circuit_id for s in status.loaded_srs] == ["porep-32g"]
        req = sample_porep(1)
        answer = await stub.Prove(pb.ProveRequest(submit=req), timeout=10)
    assert answer.result.status == pb.AwaitProofResponse.COMPLETED
    assert snark.verify(req, answer.result.proof)
    t = cuzk_truth(sim, m.instance_id)
    assert t["proofs_completed"] == 1 and t["proofs_by_kind"] == {"porep-c2": 1}
    assert t["bad_proofs"] == 0


async def test_a_proof_takes_the_capacity_models_time_on_the_simulators_clock(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    t = cuzk_truth(sim, m.instance_id)
    seconds = t["seconds_per_proof"]["porep-c2"]
    # One GPU kept busy proves the machine's rate: gpus x 3600 / seconds.
    assert t["gpus"] * 3600 / seconds == pytest.approx(t["capacity_per_hour"], rel=1e-3)
    assert (
        t["proofs_per_hour"]
        == t["capacity_per_hour"]
        == truth(sim, m.instance_id)["expected_proofs_per_hour"]
    )
    async with m.channel() as channel:
        stub = ProvingEngineStub(channel)
        await preload(sim, stub)
        task = await start_proof(stub, sample_porep(2))
        sim.market.advance(seconds - 2)
        await asyncio.sleep(0.3)
        assert not task.done(), "the proof finished before its time"
        sim.market.advance(3)
        answer = await asyncio.wait_for(task, 5)
    assert answer.result.status == pb.AwaitProofResponse.COMPLETED


async def test_only_the_router_gets_in_and_only_to_the_machine_it_names(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    async with m.channel() as channel:  # the router, to the right machine
        await ProvingEngineStub(channel).GetStatus(pb.GetStatusRequest(), timeout=5)
    # The right CA and name, no client certificate: the front refuses.
    anonymous = grpc.aio.secure_channel(
        m.address,
        grpc.ssl_channel_credentials(root_certificates=authority.ca_pem.encode()),
        options=[*channel_options(), ("grpc.ssl_target_name_override", server_name(LABEL))],
    )
    assert await refused(anonymous) == grpc.StatusCode.UNAVAILABLE
    # The router, believing it calls another machine: its name does not match.
    assert await refused(m.channel(OTHER)) == grpc.StatusCode.UNAVAILABLE
    # A machine's own certificate as a client (CN not fleet-router, serverAuth only).
    other = authority.machine_credential(OTHER)
    impostor = grpc.aio.secure_channel(
        m.address,
        grpc.ssl_channel_credentials(
            root_certificates=authority.ca_pem.encode(),
            private_key=other.key_pem.encode(),
            certificate_chain=other.cert_pem.encode(),
        ),
        options=[*channel_options(), ("grpc.ssl_target_name_override", server_name(LABEL))],
    )
    assert await refused(impostor) == grpc.StatusCode.UNAVAILABLE


def _broken_envs(authority: Authority, tmp: Path) -> dict[str, dict[str, str]]:
    good = router_env(authority, LABEL)
    foreign = Authority.load_or_create(tmp / "other-ca")
    return {
        "no credentials": {"FLEET_FRONT_PORT": "9821", "-p 9821:9821": "1"},
        "not base64": {**good, "FLEET_FRONT_CERT": "not base64 at all!"},
        "another machine's key": {
            **good,
            "FLEET_FRONT_KEY": machine_env(authority.machine_credential(OTHER), authority.ca_pem)[
                "FLEET_FRONT_KEY"
            ],
        },
        "a CA that is no certificate": {
            **good,
            "FLEET_ROUTER_CA": machine_env(foreign.machine_credential(LABEL), foreign.ca_pem)[
                "FLEET_FRONT_KEY"
            ],
        },
    }


@pytest.mark.parametrize(
    "case", ["no credentials", "not base64", "another machine's key", "a CA that is no certificate"]
)
def test_a_create_the_image_would_refuse_serves_nothing(
    sim: SimServer, authority: Authority, tmp_path: Path, case: str
) -> None:
    env = _broken_envs(authority, tmp_path)[case]
    m = boot(sim, authority, LABEL, env=env, serve=False)
    advance_until(sim, lambda: truth(sim, m.instance_id)["prover_phase"] == "proving", step=60)
    t = cuzk_truth(sim, m.instance_id)
    assert t["refusal"] is not None and t["refusal"].startswith("refusing to start")
    assert not t["serving"] and "PRIVATE KEY-----" not in t["refusal"]
    assert _connect_refused(m.address)


def test_a_host_under_128_gib_serves_nothing(sim: SimServer, authority: Authority) -> None:
    # prover_image/entrypoint.py: cuzk needs 128 GiB (curio's cuzk documentation).
    # (any driver: the image refuses before cuzk would meet it)
    m = boot(
        sim,
        authority,
        LABEL,
        serve=False,
        cpu_ram={"gte": 61_440, "lte": 124_000},
        cuda_max_good={"gte": 0},
    )
    t = cuzk_truth(sim, m.instance_id)
    assert "RAM" in (t["refusal"] or "") and not t["serving"]


def test_a_create_without_the_router_variables_is_not_in_router_mode(sim: SimServer) -> None:
    iid = rent(sim, find_offer(sim)["id"])  # the curio_on_host create
    advance_until(sim, lambda: row(sim, iid)["actual_status"] == "running", step=60)
    assert "9821/tcp" not in row(sim, iid)["ports"] and truth(sim, iid)["cuzk"] is None
    with api(sim) as c:
        assert c.get("/_sim/cuzk").json()["machines"] == []


async def test_stopping_drops_the_server_mid_proof_and_starting_serves_a_new_cuzk(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    async with m.channel() as channel:
        stub = ProvingEngineStub(channel)
        await preload(sim, stub)
        task = await start_proof(stub, sample_porep(3))
        m.act("stop")
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await asyncio.wait_for(task, 5)
        assert info.value.code() in DROPPED
    await eventually(lambda: _connect_refused(m.address))
    m.act("start")
    advance_until(sim, lambda: cuzk_truth(sim, m.instance_id)["serving"], step=30)
    status = await eventually(lambda: _status(m), timeout=5)
    assert not status.loaded_srs  # a new process: nothing loaded yet
    assert cuzk_truth(sim, m.instance_id)["proofs_completed"] == 0


async def _status(m: RouterMachine) -> pb.GetStatusResponse | None:
    """Its GetStatus, or None when it is not answered within a second."""
    async with m.channel() as channel:
        try:
            return await ProvingEngineStub(channel).GetStatus(pb.GetStatusRequest(), timeout=1)
        except grpc.aio.AioRpcError:
            return None


async def test_a_frozen_machine_holds_every_call_and_thaws(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    m.act("freeze")

    async def hangs() -> bool:
        async with m.channel() as channel:
            try:
                await ProvingEngineStub(channel).GetStatus(pb.GetStatusRequest(), timeout=0.3)
            except grpc.aio.AioRpcError as exc:
                return exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        return False

    await eventually(hangs)
    m.act("unfreeze")
    assert await eventually(lambda: _status(m))


async def test_destroying_the_instance_drops_its_server(
    sim: SimServer, authority: Authority
) -> None:
    m = boot(sim, authority, LABEL)
    async with m.channel() as channel:
        stub = ProvingEngineStub(channel)
        await preload(sim, stub)
        task = await start_proof(stub, sample_porep(4))
        with api(sim) as c:
            c.delete(f"/api/v0/instances/{m.instance_id}/").raise_for_status()
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await asyncio.wait_for(task, 5)
        assert info.value.code() in DROPPED
    await eventually(lambda: _connect_refused(m.address))


async def test_the_truth_counts_what_each_machine_proved(
    sim: SimServer, authority: Authority
) -> None:
    a = boot(sim, authority, LABEL)
    b = boot(sim, authority, OTHER)
    sim.market.set_speed(50_000)
    proved = {a.instance_id: 0, b.instance_id: 0}
    for m, count in ((a, 3), (b, 1)):
        async with m.channel() as channel:
            stub = ProvingEngineStub(channel)
            for n in range(count):
                req = sample_porep(n, miner=m.instance_id % 10_000)
                answer = await stub.Prove(pb.ProveRequest(submit=req), timeout=10)
                assert snark.verify(req, answer.result.proof)
                proved[m.instance_id] += 1
            snap = pb.SubmitProofRequest(
                request_id=f"snap-1000-{m.instance_id}",
                proof_kind=pb.SNAP_DEALS_UPDATE,
                vanilla_proof=b"s" * 100,
            )
            await stub.Prove(pb.ProveRequest(submit=snap), timeout=10)
    for m in (a, b):
        t = cuzk_truth(sim, m.instance_id)
        assert t["proofs_by_kind"] == {"porep-c2": proved[m.instance_id], "snap-update": 1}
        assert t["proofs_completed"] == proved[m.instance_id] + 1
    with api(sim) as c:
        state = c.get("/_sim/state").json()
    by_id = {i["id"]: i for i in state["instances"]}
    assert by_id[a.instance_id]["cuzk"]["proofs_completed"] == 4
