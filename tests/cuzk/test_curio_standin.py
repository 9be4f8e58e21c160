"""The Curio stand-in behaves as Curio does against a cuzk address.

A small cuzk of the test's own (grpc.aio, `add_servicer`) answers Prove as
told: a bad proof first, a hang past ProveTimeout, a failed status, full
queues. Checked: a failed task is retried with the same request id after
harmony's RetryWait (curio harmony/harmonytask/task_type_handler.go), at
most MaxPending tasks run at once (TaskMax, lib/cuzk/client.go), HasCapacity
holds claims while GetStatus shows full queues, a Prove past ProveTimeout
fails and is retried, and the summary counts lost and duplicated proofs.
Times run at `speed` so each test takes well under a second or two.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import grpc.aio
import pytest

from fleet_agent.cuzk.service import add_servicer, pb
from simulator import snark
from simulator.curio import (
    Attempt,
    CurioConfig,
    CurioStandIn,
    JobRecord,
    arrival_times,
    porep_request_id,
    summarize,
    vanilla_input,
)

_Ctx = grpc.aio.ServicerContext[Any, Any]
#: An answer for the n-th (1-based) Prove of one request id: (status, good proof?).
Script = Callable[[int], tuple[pb.AwaitProofResponse.Status, bool]]
COMPLETED = pb.AwaitProofResponse.COMPLETED


def honest(_n: int) -> tuple[pb.AwaitProofResponse.Status, bool]:
    return COMPLETED, True


class FakeCuzk:
    """A cuzk that answers each request id's n-th Prove per `script`, after
    `prove_s` (or `hang_s` for the first `hangs` calls of an id). GetStatus
    shows its in-flight Proves plus `pending` (queues as curio
    extern/cuzk/cuzk-server/src/service.rs: one per kind, named "porep-c2")."""

    def __init__(
        self, script: Script = honest, prove_s: float = 0.0, hangs: int = 0, hang_s: float = 0.0
    ) -> None:
        self.script = script
        self.prove_s = prove_s
        self.hangs = hangs
        self.hang_s = hang_s
        self.pending = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls: list[tuple[str, float]] = []
        self.seen: Counter[str] = Counter()

    async def Prove(self, request: pb.ProveRequest, context: _Ctx) -> pb.ProveResponse:
        sub = request.submit
        self.seen[sub.request_id] += 1
        n = self.seen[sub.request_id]
        self.calls.append((sub.request_id, time.monotonic()))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.hang_s if n <= self.hangs else self.prove_s)
        finally:
            self.in_flight -= 1
        status, good = self.script(n)
        proof = snark.prove(sub) if good else bytes(snark.PROOF_BYTES)
        return pb.ProveResponse(
            result=pb.AwaitProofResponse(
                job_id=sub.request_id,
                status=status,
                proof=proof if status == COMPLETED else b"",
                total_ms=int(self.prove_s * 1000),
            )
        )

    async def GetStatus(self, request: pb.GetStatusRequest, context: _Ctx) -> pb.GetStatusResponse:
        return pb.GetStatusResponse(
            queues=[
                pb.QueueStatus(
                    proof_kind="porep-c2", pending=self.pending, in_progress=self.in_flight
                )
            ]
        )


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[FakeCuzk], Any]]:
    servers: list[grpc.aio.Server] = []

    async def start(fake: FakeCuzk) -> str:
        server = grpc.aio.server()
        add_servicer(server, fake)  # type: ignore[arg-type]
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        servers.append(server)
        return f"127.0.0.1:{port}"

    yield start
    for server in servers:
        await server.stop(0)


async def _until(condition: Callable[[], bool], within: float = 5.0) -> None:
    """Poll `condition` (a counter of the stand-in's) until true or `within` s."""
    async with asyncio.timeout(within):
        while not condition():  # noqa: ASYNC110 - a plain counter, no event to wait on
            await asyncio.sleep(0.01)


def config(address: str, **kw: Any) -> CurioConfig:
    base: dict[str, Any] = {"cuzk": address, "input_bytes": 4096, "speed": 20.0}
    return CurioConfig(**(base | kw))


async def test_request_is_curios_porep_request(serve: Any) -> None:
    """lib/ffi/cuzk_funcs.go PoRepSnarkCuzk's fields; each sector's input its own."""
    got: list[pb.SubmitProofRequest] = []

    class Keep(FakeCuzk):
        async def Prove(self, request: pb.ProveRequest, context: _Ctx) -> pb.ProveResponse:
            got.append(request.submit)
            return await super().Prove(request, context)

    async with CurioStandIn(config(await serve(Keep()), miner_id=1234)) as node:
        node.submit(7)
        node.submit(8)
        assert await node.wait_all(5)
    first = next(r for r in got if r.sector_number == 7)
    assert first.request_id == "porep-1234-7"
    assert first.proof_kind == pb.POREP_SEAL_COMMIT
    assert first.priority == pb.NORMAL
    assert (first.miner_id, first.sector_size, first.registered_proof) == (1234, 32 << 30, 8)
    assert len(first.vanilla_proof) == 4096
    assert got[0].vanilla_proof != got[1].vanilla_proof
    assert porep_request_id(1234, 7, task_id=42) == "ps-porep-1234-7-42"


async def test_bad_proof_is_retried_with_the_same_id_after_retry_wait(serve: Any) -> None:
    """Verification fails -> the task fails -> harmony retries it after
    RetryWait(1) = 2 s (Curio time; 0.1 s at speed 20), same request id."""
    fake = FakeCuzk(script=lambda n: (COMPLETED, n > 1))
    async with CurioStandIn(config(await serve(fake))) as node:
        job = node.submit()
        assert await node.wait_all(5)
    assert [rid for rid, _ in fake.calls] == [job.request_id, job.request_id]
    assert fake.calls[1][1] - fake.calls[0][1] >= 2.0 / 20
    assert [(a.outcome, a.verified) for a in job.attempts] == [("bad_proof", False), ("ok", True)]
    assert (job.state, job.retries) == ("done", 1)
    s = node.summary()
    assert (s.done, s.lost, s.duplicates, s.failures) == (1, 0, 0, {"bad_proof": 1})


@pytest.mark.parametrize(
    ("status", "proof_ok", "outcome"),
    [
        (pb.AwaitProofResponse.FAILED, True, "status:FAILED"),
        (pb.AwaitProofResponse.CANCELLED, True, "status:CANCELLED"),
        (pb.AwaitProofResponse.TIMEOUT, True, "status:TIMEOUT"),
        (pb.AwaitProofResponse.UNKNOWN, True, "status:UNKNOWN"),
    ],
)
async def test_a_status_other_than_completed_is_a_failure(
    serve: Any, status: pb.AwaitProofResponse.Status, proof_ok: bool, outcome: str
) -> None:
    """client.go Prove: FAILED, CANCELLED, TIMEOUT and unknown are errors."""
    fake = FakeCuzk(script=lambda n: (status, proof_ok) if n == 1 else (COMPLETED, True))
    async with CurioStandIn(config(await serve(fake), speed=200.0)) as node:
        job = node.submit()
        assert await node.wait_all(5)
    assert [a.outcome for a in job.attempts] == [outcome, "ok"]


async def test_prove_past_prove_timeout_fails_and_is_retried(serve: Any) -> None:
    """ProveTimeout 2 s (0.1 s real): the first call hangs 1 s real and is
    cut at the deadline; the retry carries the same id and is done."""
    fake = FakeCuzk(hangs=1, hang_s=1.0)
    async with CurioStandIn(config(await serve(fake), prove_timeout_s=2.0)) as node:
        job = node.submit()
        assert await node.wait_all(5)
    assert [a.outcome for a in job.attempts] == ["timeout", "ok"]
    first = job.attempts[0]
    assert first.rpc_s is not None and first.rpc_s < 0.5
    assert [rid for rid, _ in fake.calls] == [job.request_id] * 2


async def test_never_more_than_max_pending_in_flight(serve: Any) -> None:
    """TaskMax: 12 tasks, MaxPending 3 -> 3 Proves at once at most, and 3 reached."""
    fake = FakeCuzk(prove_s=0.05)
    async with CurioStandIn(config(await serve(fake), max_pending=3)) as node:
        for _ in range(12):
            node.submit()
        assert await node.wait_all(5)
    assert fake.max_in_flight == 3
    assert node.max_in_flight == 3
    assert node.summary().done == 12


async def test_has_capacity_holds_claims_while_queues_are_full(serve: Any) -> None:
    """check_capacity: GetStatus shows MaxPending queued elsewhere -> no Prove,
    the claim looks again each idleTryInterval; once the queue empties the work goes."""
    fake = FakeCuzk(prove_s=0.02)
    fake.pending = 4
    cfg = config(await serve(fake), max_pending=4, check_capacity=True, speed=50.0)
    async with CurioStandIn(cfg) as node:
        for _ in range(3):
            node.submit()
        await _until(lambda: node.capacity_waits >= 3)
        assert fake.calls == []
        fake.pending = 0
        assert await node.wait_all(5)
    assert node.summary().done == 3


async def test_has_capacity_counts_queues_and_task_max_still_bounds(serve: Any) -> None:
    """MaxPending 3 with 2 pending elsewhere: HasCapacity says 1, yet claims made
    before the last one's Prove reaches cuzk see the same 1 (the race curio
    commit 3f74a5cd describes); TaskMax still holds every Prove to MaxPending."""
    fake = FakeCuzk(prove_s=0.03)
    fake.pending = 2
    cfg = config(await serve(fake), max_pending=3, check_capacity=True, speed=100.0)
    async with CurioStandIn(cfg) as node:
        assert await node.has_capacity() == 1
        fake.pending = 3
        assert await node.has_capacity() == 0
        fake.pending = 2
        for _ in range(8):
            node.submit()
        assert await node.wait_all(5)
    assert 1 <= fake.max_in_flight <= 3
    assert node.max_in_flight <= 3
    assert node.summary().done == 8


async def test_lost_after_max_failures(serve: Any) -> None:
    """A machine that only answers bad proofs: MaxFailures 3 -> 3 attempts, then dropped."""
    fake = FakeCuzk(script=lambda n: (COMPLETED, False))
    async with CurioStandIn(config(await serve(fake), max_failures=3, speed=100.0)) as node:
        job = node.submit()
        other = node.submit()
        assert await node.wait_all(5)
    assert [a.outcome for a in job.attempts] == ["bad_proof"] * 3
    assert (job.state, job.retries, other.state) == ("dropped", 2, "dropped")
    s = node.summary()
    assert (s.arrived, s.done, s.lost, s.dropped, s.unfinished, s.duplicates) == (2, 0, 2, 2, 0, 0)
    assert s.on_time_pct == 0.0


async def test_a_proof_verified_twice_is_a_duplicate(serve: Any) -> None:
    """Storing a verified proof fails -> retry -> the same id proven and verified again."""
    fake = FakeCuzk()
    cfg = config(await serve(fake), store_failure_p=1.0, max_failures=2, speed=100.0)
    async with CurioStandIn(cfg) as node:
        job = node.submit()
        assert await node.wait_all(5)
    assert [a.outcome for a in job.attempts] == ["store_failed"] * 2
    s = node.summary()
    assert (s.duplicates, s.lost, s.dropped) == (1, 1, 1)


def _job(rid: str, submitted: float, deadline: float, state: str, *verified: bool) -> JobRecord:
    job = JobRecord(request_id=rid, sector=0, submitted=submitted, deadline=deadline)
    job.state = state  # type: ignore[assignment]
    for v in verified:
        job.attempts.append(
            Attempt(started=submitted, ended=submitted + 1, outcome="ok" if v else "bad_proof",
                    rpc_s=1.0, cuzk_total_ms=800, verified=v)
        )  # fmt: skip
    if state == "done":
        job.done_at = submitted + 10
    return job


def test_summary_counts() -> None:
    jobs = [
        _job("porep-1-1", 0, 20, "done", True),  # on time
        _job("porep-1-2", 0, 5, "done", False, True),  # late, a retry
        _job("porep-1-3", 0, 20, "dropped", False, False),  # lost
        _job("porep-1-4", 0, 20, "running"),  # unfinished: lost
        _job("porep-1-5", 0, 20, "done", True),  # same id twice, each verified:
        _job("porep-1-5", 1, 20, "done", True),  # one duplicate
    ]
    jobs[1].retries = 1
    s = summarize(jobs)
    assert (s.arrived, s.done, s.done_on_time, s.late) == (6, 4, 3, 1)
    assert (s.lost, s.dropped, s.unfinished, s.duplicates) == (2, 1, 1, 1)
    assert (s.attempts, s.retries, s.failures) == (7, 1, {"bad_proof": 3})
    assert s.on_time_pct == pytest.approx(50.0)
    assert s.latency_p50_s == 10
    assert s.added_p50_s == pytest.approx(0.2)


def test_inputs_and_arrivals() -> None:
    block = bytes(range(256)) * 4
    a, b = vanilla_input(block, 1, 1, 10_000), vanilla_input(block, 1, 2, 10_000)
    assert len(a) == len(b) == 10_000 and a != b
    assert vanilla_input(block, 1, 1, 10_000) == a
    times = arrival_times(60, rate_per_hour=600, seed=3)
    assert 480 < len(times) < 720 and all(0 <= t < 3600 for t in times)
    assert times == arrival_times(60, rate_per_hour=600, seed=3)


async def test_no_status_is_no_capacity() -> None:
    """HasCapacity when GetStatus fails: 0 (client.go returns 0 and the error)."""
    cfg = CurioConfig(cuzk="127.0.0.1:9", status_timeout_s=0.2, check_capacity=True)
    async with CurioStandIn(cfg) as node:
        assert await node.has_capacity() == 0


async def test_router_bench_tap_counts_proofs_not_polls(serve: Any) -> None:
    """bench/perf/router.py's tap: each proof's bytes sent through it count
    once; GetStatus polls do not; the bytes arrive whole (the proofs verify)."""
    from bench.perf._router_stack import Tap

    fake = FakeCuzk()
    tap = Tap(await serve(fake), input_bytes=200_000)
    address = await tap.start()
    try:
        cfg = config(address, input_bytes=200_000, check_capacity=True, speed=100.0)
        async with CurioStandIn(cfg) as node:
            for _ in range(5):
                node.submit()
            assert await node.wait_all(5)
            for _ in range(20):
                await node.has_capacity()
    finally:
        await tap.stop()
    assert node.summary().done == 5
    assert len(tap.sends) == 5
    assert 5 * 200_000 < tap.upstream_bytes < 5 * 200_000 * 1.1
