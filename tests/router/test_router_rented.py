"""The router trusts what we rent, not what a host says: a member's GPUs are
at most the rented ``num_gpus`` the agent names (`MemberSpec.gpus`), and an
attempt's budget follows the capacity model's expected rate for that
machine (`MemberSpec.expected_proofs_per_hour`). The agent fills both from
the vast.ai row (activities/fleet_router.py). Stand-in shapes:
simulator/cuzk (``lies`` claims 64 idle GPUs, as bench/perf/router.py's liar).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest

from activities.fleet_router import RouterLink, rented_capacity
from fleet_agent.cuzk.service import pb
from fleet_agent.cuzk.witness import MemberSpec
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.fleet.snapshot import estimate
from fleet_agent.store import RouterMembers, Store
from fleet_agent.vast.models import Instance
from router.config import RouterConfig
from router.dispatch import attempt_budget
from router.jobs import JobTable
from router.members import Member
from simulator.curio import sample_porep
from tests.helpers.router import (
    Fleet,
    answered_member,
    curio_prove,
    member_spec,
    standin,
    wait_until,
    with_config,
)

CFG = RouterConfig()


def _member(claimed_gpus: int, **spec: Any) -> Member:
    return answered_member(member_spec(1, **spec), claimed_gpus, CFG)


def test_a_hosts_gpu_count_never_raises_the_rented_one_only_lowers_it() -> None:
    liar = _member(64, gpus=1)
    assert (liar.gpus, liar.capacity(CFG)) == (1, CFG.per_gpu_depth)
    assert _member(2, gpus=4).gpus == 2  # a host with a GPU gone: fewer
    assert _member(0, gpus=4).gpus == 1  # at least one, as before
    assert _member(64).gpus == CFG.max_gpus_counted  # not named: the old cap


def test_an_attempt_budget_follows_the_members_expected_rate() -> None:
    cfg = replace(CFG, attempt_factor=3.0, min_attempt_s=30.0)
    job = JobTable(cfg).admit(sample_porep(1), 1e9, 0.0).job
    assert job is not None
    # 2 GPUs, 72 proofs/h: a PoRep takes 100 s on one of them.
    rated = _member(2, gpus=2, expected_proofs_per_hour=72.0)
    assert attempt_budget(job, 0.0, cfg, rated) == (300.0, False)
    # No estimate: the config's 150 s.
    assert attempt_budget(job, 0.0, cfg, _member(2, gpus=2)) == (450.0, False)
    assert attempt_budget(job, 0.0, cfg) == (450.0, False)
    # Other kinds in the config's proportion (snap 120 s of PoRep's 150 s).
    assert rated.expected_seconds("snap-update", cfg) == pytest.approx(80.0)
    # The rented GPUs count for the rate, not the host's: a liar's 64 do not shorten it.
    assert _member(64, gpus=2, expected_proofs_per_hour=72.0).expected_seconds(
        "porep-c2", cfg
    ) == pytest.approx(100.0)
    # A simulated fleet at speed 5: the model's hours are simulated ones.
    assert attempt_budget(job, 0.0, cfg, rated, speed=5.0) == (60.0, False)
    # Still cut at the deadline.
    job.deadline = 100.0
    assert attempt_budget(job, 0.0, cfg, rated) == (100.0, True)


def test_member_spec_bounds() -> None:
    for bad in ({"gpus": 0}, {"gpus": 65}, {"expected_proofs_per_hour": 0.0}):
        with pytest.raises(ValueError):
            MemberSpec(instance_id=1, label="m", address="a:1", **bad)
    with pytest.raises(ValueError):
        MemberSpec(instance_id=1, label="m", address="a:1", expected_proofs_per_hour=float("inf"))


# -- through gRPC ---------------------------------------------------------


async def test_a_liar_claiming_64_gpus_on_a_1_gpu_member_gets_its_per_gpu_depth() -> None:
    async with Fleet([standin(0.2, "lies")]) as f:
        f.specs = [s.model_copy(update={"gpus": 1}) for s in f.specs]
        f.router.set_members(f.specs)
        await f.serving()
        member = f.router.members.get(1)
        assert member is not None
        most = 0

        async def watch() -> None:
            nonlocal most
            while True:
                most = max(most, member.book.in_flight)
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch())
        try:
            await asyncio.gather(
                *(curio_prove(f.stub, sample_porep(n), timeout=10) for n in range(6))
            )
        finally:
            watcher.cancel()
        assert member.gpus == 1
        assert most == f.router.config.per_gpu_depth  # 2, not 6: the others waited
        assert f.witness(1).done == 6


async def test_a_slow_machine_rated_slow_is_given_the_time_its_rate_says() -> None:
    # The config expects 0.5 s (an attempt gets 1.5 s); this machine proves in
    # 2 s and the agent's estimate says so (1800/h on one GPU): one attempt.
    cfg = with_config(expected_seconds={"porep-c2": 0.5}, attempt_factor=3.0)
    async with Fleet([standin(2.0)], config=cfg) as f:
        f.specs = [
            s.model_copy(update={"gpus": 1, "expected_proofs_per_hour": 1800.0}) for s in f.specs
        ]
        f.router.set_members(f.specs)
        await f.serving()
        t0 = time.monotonic()
        result = await curio_prove(f.stub, sample_porep(1), timeout=15)
        assert result.status == pb.AwaitProofResponse.COMPLETED
        assert f.router.attempt_outcomes == {"done": 1}, f"in {time.monotonic() - t0:.1f} s"
        await wait_until(lambda: f.witness(1).lost == 0)


# -- the agent's side -----------------------------------------------------


def _instance(**fields: object) -> Instance:
    row: dict[str, object] = {
        "id": 7,
        "actual_status": "running",
        "label": "fleet-agent/a/r1-7",
        "gpu_name": "RTX 4090",
        "num_gpus": 2,
        "cpu_ram": 512 * 1024,
        "cpu_cores_effective": 32,
        "public_ipaddr": "127.0.0.1",
        "ports": {"9821/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40007"}]},
        **fields,
    }
    return Instance.model_validate(row)


async def test_the_agent_names_the_rented_gpus_and_the_models_rate(store: Store) -> None:
    link = RouterLink(store, ProverSpec(allow_loopback=True))
    inst = _instance()
    look = await link.look("a", [inst], time.time())
    assert look.refused == {}
    # What the router reads back from the store (router/store_sync.py does the same).
    (spec,) = RouterMembers(store).load("a")
    assert spec.gpus == 2 and spec.address == "127.0.0.1:40007"
    assert spec.expected_proofs_per_hour == pytest.approx(estimate(inst))
    assert spec.expected_proofs_per_hour is not None and spec.expected_proofs_per_hour > 0
    # A drain names them too.
    assert await link.drain("a", inst, time.time()) is None
    (drained,) = RouterMembers(store).load("a")
    assert drained.want == "drain" and drained.gpus == 2
    # Unknown or out of bounds: left out, the router uses its own.
    assert rented_capacity(_instance(num_gpus=None)) == (None, None)
    assert rented_capacity(_instance(num_gpus=500))[0] is None
    assert rented_capacity(_instance(gpu_name=None)) == (2, None)
