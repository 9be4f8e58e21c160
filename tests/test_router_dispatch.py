"""The router as Curio's client sees it: Prove through it to cuzk stand-ins, on loopback.

Each test starts real gRPC servers (simulator/cuzk stand-ins and the router)
and calls the router with `ProvingEngineStub`, as curio ``lib/cuzk/client.go``
does; proofs are checked as Curio checks them (snark.verify).
"""

from __future__ import annotations

import asyncio

from fleet_agent.cuzk.service import pb
from tests.router_helpers import (
    Fleet,
    curio_prove,
    porep,
    standin,
    verified,
    wait_until,
    with_config,
)


async def test_prove_round_trip_through_router_to_three_standins() -> None:
    async with Fleet([standin(0.1), standin(0.1), standin(0.1)]) as f:
        await f.serving()
        reqs = [porep(n) for n in range(6)]
        results = await asyncio.gather(*(curio_prove(f.stub, r) for r in reqs))
        assert all(verified(r, res) for r, res in zip(reqs, results, strict=True))
        assert [res.job_id for res in results] == [r.request_id for r in reqs]
        # Least loaded first: six proofs at once on three one-GPU machines, two each.
        assert sorted(len(s.engine.proved) for s in f.standins) == [2, 2, 2]
        assert sum(f.witness(i).done for i in (1, 2, 3)) == 6
        status = await f.stub.GetStatus(pb.GetStatusRequest(), timeout=2)
        assert status.total_proofs_completed == 6


async def test_same_request_id_concurrently_is_one_job_on_one_machine() -> None:
    async with Fleet([standin(0.2), standin(0.2), standin(0.2)]) as f:
        await f.serving()
        req = porep(7)
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
        reqs = [porep(n) for n in range(14)]
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
