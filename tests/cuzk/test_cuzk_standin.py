"""The cuzk stand-in answers as curio's cuzk daemon does, and each behaviour behaves.

Shapes from curio ``extern/cuzk/cuzk-server/src/service.rs`` (errors, HOT
SRS of size 0, one QueueStatus per kind *waiting*, its Display name, GPUs
from workers) and ``cuzk-core`` (``types.rs`` Display and metric labels,
``engine.rs`` job id = request id). Real gRPC on loopback.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import grpc.aio
import pytest

from fleet_agent.cuzk.service import ProvingEngineStub, channel_options, pb
from simulator import snark
from simulator.curio import sample_porep
from simulator.cuzk import Behaviour, CuzkStandIn, StandInConfig
from tests.helpers.router import standin, wait_until

COMPLETED = pb.AwaitProofResponse.COMPLETED


@asynccontextmanager
async def running(config: StandInConfig) -> AsyncIterator[tuple[CuzkStandIn, ProvingEngineStub]]:
    s = await CuzkStandIn.start(config)
    channel = grpc.aio.insecure_channel(s.address, options=channel_options())
    try:
        yield s, ProvingEngineStub(channel)
    finally:
        await channel.close(None)
        await s.stop()


def _prove(req: pb.SubmitProofRequest) -> pb.ProveRequest:
    return pb.ProveRequest(submit=req)


async def test_prove_returns_the_snark_with_cuzks_timings() -> None:
    async with running(standin(0.05)) as (_, stub):
        req = sample_porep(1)
        resp = await stub.Prove(_prove(req), timeout=5)
        r = resp.result
        assert (r.job_id, r.status) == (req.request_id, COMPLETED)
        assert snark.verify(req, r.proof)
        # Phase 0: srs_load, synthesis and gpu_compute all carry the proving time.
        assert r.srs_load_ms == r.synthesis_ms == r.gpu_compute_ms >= 40
        assert r.total_ms >= r.gpu_compute_ms


async def test_status_lists_waiting_kinds_by_display_name_and_gpus_from_workers() -> None:
    async with running(standin(0.3, gpus=1)) as (s, stub):
        snap = pb.SubmitProofRequest(
            request_id="snap-1-1", proof_kind=pb.SNAP_DEALS_UPDATE, sector_size=32 << 30
        )
        calls = [asyncio.create_task(stub.Prove(_prove(sample_porep(1)), timeout=5))]
        await wait_until(lambda: s.engine.workers[0].current is not None, what="porep running")
        calls.append(asyncio.create_task(stub.Prove(_prove(snap), timeout=5)))
        await wait_until(lambda: bool(s.engine.queue_stats()), what="snap waiting")
        st = await stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        # The running PoRep's kind has nothing waiting: cuzk lists only waiting kinds.
        assert [(q.proof_kind, q.pending, q.in_progress) for q in st.queues] == [
            ("snap-update", 1, 0)
        ]
        assert [(g.ordinal, g.current_job_id, g.current_proof_kind) for g in st.gpus] == [
            (0, "porep-1000-1", "porep-c2")
        ]
        assert [(s.circuit_id, s.tier, s.size_bytes) for s in st.loaded_srs] == [
            ("porep-32g", pb.SRSStatus.HOT, 0)
        ]
        await asyncio.gather(*calls)
        st = await stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        assert (st.total_proofs_completed, list(st.queues)) == (2, [])
        text = (await stub.GetMetrics(pb.GetMetricsRequest(), timeout=5)).prometheus_text
        assert 'cuzk_proofs_completed{proof_kind="porep_c2"} 1' in text
        assert 'cuzk_proofs_completed{proof_kind="snap_update"} 1' in text
        assert "cuzk_gpu_workers 1\n" in text


async def test_errors_are_cuzks() -> None:
    async with running(standin(0.05)) as (_, stub):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Prove(pb.ProveRequest(), timeout=5)
        assert (err.value.code(), err.value.details()) == (
            grpc.StatusCode.INVALID_ARGUMENT,
            "missing submit field",
        )
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Prove(_prove(pb.SubmitProofRequest(request_id="x")), timeout=5)
        assert err.value.details() == "invalid proof_kind: 0"
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.AwaitProof(pb.AwaitProofRequest(job_id="nope"), timeout=5)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-1g"), timeout=5)
        assert err.value.code() == grpc.StatusCode.INTERNAL
        cancel = await stub.CancelProof(pb.CancelProofRequest(job_id="x"), timeout=5)
        assert not cancel.was_running  # not implemented in cuzk's phase 0


async def test_submit_then_await_and_preload_after_its_delay() -> None:
    cfg = StandInConfig(proof_seconds={"porep-c2": 0.05}, preload=(), preload_seconds=0.2)
    async with running(cfg) as (_, stub):
        st = await stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        assert list(st.loaded_srs) == []
        pre = await stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-32g"), timeout=5)
        assert not pre.already_loaded and pre.load_time_ms >= 150
        again = await stub.PreloadSRS(pb.PreloadSrsRequest(circuit_id="porep-32g"), timeout=5)
        assert again.already_loaded
        sub = await stub.SubmitProof(sample_porep(2), timeout=5)
        assert (sub.job_id, sub.queue_position) == ("porep-1000-2", 0)
        res = await stub.AwaitProof(pb.AwaitProofRequest(job_id=sub.job_id), timeout=5)
        assert res.status == COMPLETED and snark.verify(sample_porep(2), res.proof)


async def test_bad_proofs_are_the_right_length_and_fail_verification() -> None:
    async with running(standin(0.05, "bad")) as (_, stub):
        r = (await stub.Prove(_prove(sample_porep(1)), timeout=5)).result
        assert r.status == COMPLETED and len(r.proof) == snark.PROOF_BYTES
        assert not snark.verify(sample_porep(1), r.proof)


async def test_a_liar_claims_idle_gpus_and_huge_totals() -> None:
    async with running(standin(0.05, "lies")) as (s, stub):
        st = await stub.GetStatus(pb.GetStatusRequest(), timeout=5)
        assert len(st.gpus) == 64 and st.total_proofs_completed == 10**12
        assert len(s.engine.workers) == 1


async def test_slow_takes_its_factor_longer() -> None:
    async with running(standin(0.05, "slow", slow_factor=4.0)) as (_, stub):
        r = (await stub.Prove(_prove(sample_porep(1)), timeout=5)).result
        assert r.gpu_compute_ms >= 190


async def test_dies_mid_proof_drops_the_call_and_refuses_new_ones() -> None:
    async with running(standin(0.2, "dies", die_after_proofs=1)) as (s, stub):
        assert (await stub.Prove(_prove(sample_porep(1)), timeout=5)).result.status == COMPLETED
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Prove(_prove(sample_porep(2)), timeout=5)
        assert err.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        assert s.engine.dead and s.engine.proved == ["porep-1000-1"]
        await wait_until(lambda: s.stopped, what="the server stopped")
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetStatus(pb.GetStatusRequest(), timeout=1)
        assert err.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


async def test_dies_at_a_time() -> None:
    cfg = StandInConfig(speed=100.0, behaviour=Behaviour(mode="dies", die_at_s=20.0))
    async with running(cfg) as (s, _):
        await wait_until(lambda: s.stopped, timeout=2.0, what="death at 0.2 s")


async def test_trickle_answers_late_and_never_proves() -> None:
    async with running(standin(0.05, "trickle", trickle_s=0.3)) as (_, stub):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.GetStatus(pb.GetStatusRequest(), timeout=0.1)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        await stub.GetStatus(pb.GetStatusRequest(), timeout=2)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Prove(_prove(sample_porep(1)), timeout=1.0)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


async def test_command_line_prints_its_port_and_serves() -> None:
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "simulator.cuzk", "--listen", "127.0.0.1:0", "--speed", "1000"),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert line.startswith("listening 127.0.0.1:")
        async with grpc.aio.insecure_channel(line.split()[1]) as channel:
            r = await ProvingEngineStub(channel).Prove(_prove(sample_porep(1)), timeout=5)
            assert snark.verify(sample_porep(1), r.result.proof)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
