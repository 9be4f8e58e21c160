"""The router as Curio's client sees it: Prove through it to cuzk stand-ins, on loopback.

Each test starts real gRPC servers (simulator/cuzk stand-ins and the router)
and calls the router with `ProvingEngineStub`, as curio ``lib/cuzk/client.go``
does; proofs are checked as Curio checks them (snark.verify).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import grpc
import grpc.aio
import pytest

from fleet_agent.cuzk.service import ProvingEngineStub, channel_options, pb
from fleet_agent.cuzk.witness import MemberSpec
from simulator.curio import sample_porep
from simulator.cuzk import CuzkStandIn, StandInConfig
from tests.helpers.router import (
    Fleet,
    curio_prove,
    standin,
    verified,
    wait_until,
    with_config,
)


async def test_prove_round_trip_through_router_to_three_standins() -> None:
    async with Fleet([standin(0.1), standin(0.1), standin(0.1)]) as f:
        await f.serving()
        reqs = [sample_porep(n) for n in range(3)]
        results = await asyncio.gather(*(curio_prove(f.stub, r) for r in reqs))
        assert all(verified(r, res) for r, res in zip(reqs, results, strict=True))
        assert [res.job_id for res in results] == [r.request_id for r in reqs]
        # Least loaded first: three proofs at once on three one-GPU machines, one each.
        assert [len(s.engine.proved) for s in f.standins] == [1, 1, 1]
        more = [sample_porep(n) for n in range(3, 9)]
        results = await asyncio.gather(*(curio_prove(f.stub, r) for r in more))
        assert all(verified(r, res) for r, res in zip(more, results, strict=True))
        assert sum(f.witness(i).done for i in (1, 2, 3)) == 9
        status = await f.stub.GetStatus(pb.GetStatusRequest(), timeout=2)
        assert status.total_proofs_completed == 9
        metrics = await f.stub.GetMetrics(pb.GetMetricsRequest(), timeout=2)
        assert "cuzk_router_jobs_completed_total 9\n" in metrics.prometheus_text
        assert 'cuzk_router_attempts_total{outcome="done"} 9\n' in metrics.prometheus_text
        assert 'cuzk_router_members{phase="serving"} 3\n' in metrics.prometheus_text


async def test_same_request_id_concurrently_is_one_job_on_one_machine() -> None:
    async with Fleet([standin(0.2), standin(0.2), standin(0.2)]) as f:
        await f.serving()
        req = sample_porep(7)
        first = asyncio.create_task(curio_prove(f.stub, req))
        await wait_until(lambda: bool(f.router.jobs.running()), what="the job sent")
        second = await curio_prove(f.stub, req)
        assert (await first) == second
        assert verified(req, second)
        proved = [s.engine.proved.count(req.request_id) for s in f.standins]
        assert sorted(proved) == [0, 0, 1], proved
        assert f.router.jobs.submitted == 1 and f.router.jobs.joined == 1
        assert sum(f.witness(i).sent for i in (1, 2, 3)) == 1


async def test_get_status_sums_the_fleet() -> None:
    fleet = [standin(0.3, gpus=2), standin(0.3), standin(0.3, gpus=3)]
    async with Fleet(fleet, with_config(expected_seconds={"porep-c2": 0.3})) as f:
        await f.serving()
        reqs = [sample_porep(n) for n in range(14)]
        calls = [asyncio.create_task(curio_prove(f.stub, r)) for r in reqs]
        # 6 GPUs, 2 jobs per GPU: 12 on machines, 2 waiting at the router.
        await wait_until(lambda: len(f.router.jobs.running()) == 12, what="12 running")
        status = await f.stub.GetStatus(pb.GetStatusRequest(), timeout=2)
        assert [(q.proof_kind, q.pending, q.in_progress) for q in status.queues] == [
            ("porep-c2", 2, 12)
        ]
        assert len(status.gpus) == 6
        assert [g.ordinal for g in status.gpus] == list(range(6))
        assert sum(1 for g in status.gpus if g.current_proof_kind == "porep-c2") == 6
        assert [s.circuit_id for s in status.loaded_srs] == ["porep-32g"]
        await asyncio.gather(*calls)
        status = await f.stub.GetStatus(pb.GetStatusRequest(), timeout=2)
        assert status.total_proofs_completed == 14 and not status.queues
        queue = f.router.queue()
        assert queue.completed == 14 and queue.held_bytes == 0 and queue.pending == {}


async def test_a_member_joins_once_the_router_had_it_load_the_circuit() -> None:
    bare = StandInConfig(proof_seconds={"porep-c2": 0.05}, preload=(), preload_seconds=0.3)
    async with Fleet([bare]) as f:
        await wait_until(lambda: bool(f.router.members.get(1).preloading), what="PreloadSRS sent")  # type: ignore[union-attr]
        assert f.witness(1).phase == "joining"
        call = asyncio.create_task(curio_prove(f.stub, sample_porep(1)))
        await asyncio.sleep(0.1)
        assert f.router.queue().pending == {"porep-c2": 1}  # waits at the router
        await f.serving(1)
        assert verified(sample_porep(1), await call)
        assert f.witness(1).circuits == ["porep-32g"]


async def test_the_command_line_router_reads_its_members_file(tmp_path: Path) -> None:
    s = await CuzkStandIn.start(standin(0.05))
    members = tmp_path / "members.json"
    spec = MemberSpec(instance_id=1, label="m1", address=s.address)
    members.write_text(json.dumps([spec.model_dump(mode="json")]))
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "router", "--listen", "127.0.0.1:0"),
        *("--members-file", str(members), "--insecure-members", "--poll-seconds", "0.05"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("listening 127.0.0.1:"), line
        async with grpc.aio.insecure_channel(line.split()[1], options=channel_options()) as ch:
            stub = ProvingEngineStub(ch)

            async def loaded() -> bool:
                st = await stub.GetStatus(pb.GetStatusRequest(), timeout=2)
                return [x.circuit_id for x in st.loaded_srs] == ["porep-32g"]

            for _ in range(200):
                if await loaded():
                    break
                await asyncio.sleep(0.05)
            result = await curio_prove(stub, sample_porep(1))
            assert verified(sample_porep(1), result) and s.engine.proved == ["porep-1000-1"]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
        await s.stop()


async def test_submit_await_and_cancel_through_the_router() -> None:
    async with Fleet([standin(0.3)]) as f:
        await f.serving()
        sub = await f.stub.SubmitProof(sample_porep(1), timeout=2)
        assert sub.job_id == "porep-1000-1"
        res = await f.stub.AwaitProof(pb.AwaitProofRequest(job_id=sub.job_id), timeout=3)
        assert res.status == pb.AwaitProofResponse.COMPLETED and verified(sample_porep(1), res)
        call = asyncio.create_task(f.stub.Prove(pb.ProveRequest(submit=sample_porep(2)), timeout=3))
        await wait_until(lambda: f.witness(1).in_flight == 1, what="the job sent")
        cancel = await f.stub.CancelProof(pb.CancelProofRequest(job_id="porep-1000-2"), timeout=2)
        assert cancel.was_running
        assert (await call).result.status == pb.AwaitProofResponse.CANCELLED
        assert f.witness(1).lost == 1 and f.witness(1).phase == "serving"
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await f.stub.AwaitProof(pb.AwaitProofRequest(job_id="nope"), timeout=2)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
