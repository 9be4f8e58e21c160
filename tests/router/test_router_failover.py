"""When machines fail, die, lie, are drained, or the router is full: the proof still comes.

Real gRPC on loopback: cuzk stand-ins with a behaviour (simulator/cuzk
config.py), the router, and Curio's calls (`curio_prove`, then snark.verify;
a proof that fails verification is sent again with the same request_id, as
harmony retries the task: curio ``lib/ffi/cuzk_funcs.go``).
"""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

from fleet_agent.cuzk.service import pb
from router.members import utc
from simulator.curio import sample_porep
from tests.helpers.router import (
    Fleet,
    curio_prove,
    prove_verified,
    standin,
    verified,
    wait_until,
    with_config,
)


async def test_resubmission_after_completed_is_a_rejection_and_goes_elsewhere() -> None:
    async with Fleet([standin(0.05), standin(0.05)]) as f:
        await f.serving()
        req = sample_porep(1)
        first = await curio_prove(f.stub, req)
        answered_by = next(i for i, s in enumerate(f.standins, 1) if s.engine.proved)
        # Curio's verification refused it (say): the same request id comes again.
        again = await curio_prove(f.stub, req)
        assert verified(req, again) and again.proof == first.proof
        other = 3 - answered_by
        assert f.witness(answered_by).rejected == 1
        assert f.witness(other).rejected == 0
        assert f.standins[other - 1].engine.proved == [req.request_id]
        assert f.router.jobs.rejections == 1


async def test_a_machine_that_dies_mid_proof_loses_nothing() -> None:
    dies = standin(0.3, "dies", die_after_proofs=0)
    async with Fleet([dies, standin(0.3)]) as f:
        await f.serving()
        reqs = [sample_porep(n) for n in range(2)]
        results = await asyncio.gather(*(curio_prove(f.stub, r, timeout=3.0) for r in reqs))
        assert all(verified(r, res) for r, res in zip(reqs, results, strict=True))
        assert f.standins[0].engine.dead and f.standins[0].engine.proved == []
        assert sorted(f.standins[1].engine.proved) == sorted(r.request_id for r in reqs)
        w = f.witness(1)
        assert (w.sent, w.done, w.lost) == (1, 0, 1)
        await wait_until(lambda: f.witness(1).phase == "dead", what="the dead machine dead")


async def test_a_bad_machine_is_failing_after_two_rejections_and_gets_no_more_work() -> None:
    async with Fleet([standin(0.05, "bad"), standin(0.05)]) as f:
        await f.serving()
        # Two at a time: least loaded first gives each machine one.
        await asyncio.gather(prove_verified(f, sample_porep(1)), prove_verified(f, sample_porep(2)))
        assert f.witness(1).rejected == 1 and f.witness(1).phase == "serving"
        await asyncio.gather(prove_verified(f, sample_porep(3)), prove_verified(f, sample_porep(4)))
        assert f.witness(1).rejected == 2
        assert f.witness(1).phase == "failing"
        assert "rejected" in f.witness(1).reason
        sent = f.witness(1).sent
        reqs = [sample_porep(100 + k) for k in range(4)]
        results = await asyncio.gather(*(curio_prove(f.stub, r) for r in reqs))
        assert all(verified(r, res) for r, res in zip(reqs, results, strict=True))
        assert f.witness(1).sent == sent


async def test_a_trickling_machine_times_out_and_the_job_finishes_elsewhere() -> None:
    cfg = with_config(expected_seconds={"porep-c2": 0.1}, fail_streak=1)
    async with Fleet([standin(0.1, "trickle", trickle_s=0.0), standin(0.1)], cfg) as f:
        await f.serving()
        # The trickler has the lower id: it gets the first job, which never comes back.
        req = sample_porep(1)
        result = await curio_prove(f.stub, req, timeout=3.0)
        assert verified(req, result)
        w = f.witness(1)
        assert (w.sent, w.lost, w.phase) == (1, 1, "failing")
        assert f.standins[1].engine.proved == [req.request_id]


async def test_a_lying_machines_status_does_not_change_its_witness() -> None:
    async with Fleet([standin(0.2, "lies"), standin(0.2)]) as f:
        await f.serving()
        for n in range(0, 6, 2):  # two at a time: one each
            await asyncio.gather(
                curio_prove(f.stub, sample_porep(n)), curio_prove(f.stub, sample_porep(n + 1))
            )
        liar, honest = f.witness(1), f.witness(2)
        assert liar.done == 3 and honest.done == 3
        assert liar.proofs_per_busy_hour is not None and honest.proofs_per_busy_hour is not None
        # Its rate is what the router measured (~18000/h at 0.2 s), not 10^12.
        assert liar.proofs_per_busy_hour < 2 * honest.proofs_per_busy_hour
        assert liar.proofs_per_busy_hour < 40_000
        # Its 64 claimed GPUs count as 16 at most, for spreading only.
        assert f.router.members.get(1).gpus == f.router.config.max_gpus_counted  # type: ignore[union-attr]
        status = await f.stub.GetStatus(pb.GetStatusRequest(), timeout=2)
        assert status.total_proofs_completed == 6


async def test_drain_takes_no_new_work_and_is_drained_when_its_job_ends() -> None:
    async with Fleet([standin(0.3), standin(0.3)]) as f:
        await f.serving()
        first = asyncio.create_task(curio_prove(f.stub, sample_porep(1)))
        await wait_until(lambda: f.witness(1).in_flight == 1, what="a job on machine 1")
        f.drain(1)
        assert f.witness(1).phase == "draining"
        more = [sample_porep(n) for n in range(2, 6)]
        results = await asyncio.gather(*(curio_prove(f.stub, r) for r in more))
        assert all(verified(r, res) for r, res in zip(more, results, strict=True))
        assert verified(sample_porep(1), await first)
        assert f.standins[0].engine.proved == [sample_porep(1).request_id]
        await wait_until(lambda: f.witness(1).phase == "drained", what="drained")


async def test_drain_bound_takes_the_job_back_and_sends_it_elsewhere() -> None:
    clock = [1_000_000.0]
    cfg = with_config(expected_seconds={"porep-c2": 0.5})
    async with Fleet([standin(0.5), standin(0.05)], cfg, clock=lambda: clock[0]) as f:
        await f.serving()
        call = asyncio.create_task(curio_prove(f.stub, sample_porep(1)))
        await wait_until(lambda: f.witness(1).in_flight == 1, what="a job on machine 1")
        f.drain(1, drain_by=utc(clock[0] + 60))
        await asyncio.sleep(0.1)
        assert f.witness(1).in_flight == 1  # before its bound, it keeps its job
        clock[0] += 61
        result = await call
        assert verified(sample_porep(1), result)
        assert f.standins[1].engine.proved == [sample_porep(1).request_id]
        assert f.witness(1).lost == 1
        await wait_until(lambda: f.witness(1).phase == "drained", what="drained")


async def test_held_bytes_cap_refuses_with_resource_exhausted_and_loses_nothing() -> None:
    size = 10_000
    cfg = with_config(max_held_bytes=int(2.5 * (size + 100)), expected_seconds={"porep-c2": 0.3})
    async with Fleet([standin(0.3)], cfg) as f:
        await f.serving()
        held = [asyncio.create_task(curio_prove(f.stub, sample_porep(n, size))) for n in range(2)]
        await wait_until(lambda: f.router.jobs.submitted == 2, what="two jobs held")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await curio_prove(f.stub, sample_porep(3, size))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        status = await f.stub.GetStatus(pb.GetStatusRequest(), timeout=2)
        pending = sum(q.pending + q.in_progress for q in status.queues)
        assert pending >= f.router.config.full_pending  # Curio's HasCapacity sees no room
        results = await asyncio.gather(*held)
        assert all(verified(sample_porep(n, size), r) for n, r in enumerate(results))
        # Curio retries the refused task later: now there is room.
        assert verified(sample_porep(3, size), await curio_prove(f.stub, sample_porep(3, size)))
        assert f.router.queue().held_bytes == 0
        assert f.router.jobs.refused == 1 and f.router.jobs.completed == 3


async def test_a_job_no_machine_takes_answers_timeout_before_the_callers_deadline() -> None:
    async with Fleet([standin(0.05, "trickle", trickle_s=10.0)]) as f:  # never joins
        resp = await f.stub.Prove(pb.ProveRequest(submit=sample_porep(1)), timeout=0.5)
        assert resp.result.status == pb.AwaitProofResponse.TIMEOUT
        assert f.router.queue().held_bytes == 0 and f.router.jobs.live == {}
        assert f.witness(1).phase == "joining"
