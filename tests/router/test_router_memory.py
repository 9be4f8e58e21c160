"""The router holds each input once: its header is read from the wire bytes, the
bytes Curio sent are what a machine gets, and no attempt makes a copy.

Header parsing (router/inputs.py) is checked against protobuf's own parse;
the no-copy rule by identity (the member is handed the very bytes object of
the job, attempt after attempt), by content over real gRPC (a member sees
byte for byte what Curio's client sent), and by a tracemalloc measurement of
the router's Python allocations with N inputs in flight (a measurement, not
a timing). Request shapes: curio ``lib/ffi/cuzk_funcs.go`` (tests/helpers/router.py).
"""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest

from fleet_agent.cuzk.service import (
    ProvingEngineStub,
    add_raw_input_servicer,
    channel_options,
    pb,
)
from fleet_agent.cuzk.witness import MemberSpec
from router.engine import Router
from router.inputs import MalformedInput, frame, read_prove, read_submit
from router.members import insecure_connect
from router.server import start_server
from simulator.curio import sample_porep
from tests.helpers.router import FAST, wait_until, with_config

_Ctx = grpc.aio.ServicerContext[Any, Any]
COMPLETED, FAILED = pb.AwaitProofResponse.COMPLETED, pb.AwaitProofResponse.FAILED


def _prove_bytes(req: pb.SubmitProofRequest) -> bytes:
    """What Curio's client puts on the wire for Prove (lib/cuzk/client.go)."""
    return pb.ProveRequest(submit=req).SerializeToString()


# -- reading the header ----------------------------------------------------


def _requests() -> list[pb.SubmitProofRequest]:
    """One of each kind Curio sends, with every field the proto has."""
    snap = pb.SubmitProofRequest(
        request_id="snap-1000-5",
        proof_kind=pb.SNAP_DEALS_UPDATE,
        sector_size=64 * 1024**3,
        registered_proof=9,
        priority=pb.HIGH,
        vanilla_proofs=[b"a" * 3000, b"b" * 200, b""],
        sector_number=5,
        miner_id=1000,
        comm_r_old=b"o" * 32,
        comm_r_new=b"n" * 32,
        comm_d_new=b"d" * 32,
    )
    wdpost = pb.SubmitProofRequest(
        request_id="wdpost-1000-3-0a1b2c3d",
        proof_kind=pb.WINDOW_POST_PARTITION,
        vanilla_proofs=[b"v" * 500] * 4,
        randomness=b"r" * 32,
        partition_index=3,
        miner_id=1000,
    )
    unnamed = pb.SubmitProofRequest(proof_kind=pb.WINNING_POST, vanilla_proof=b"w")
    return [sample_porep(1, size=70_000), snap, wdpost, unnamed, pb.SubmitProofRequest()]


def _small(req: pb.SubmitProofRequest) -> pb.SubmitProofRequest:
    """What the header keeps of a full parse: every field but the bytes fields."""
    out = pb.SubmitProofRequest()
    out.CopyFrom(req)
    for name in ("vanilla_proof", "vanilla_proofs", "randomness", "comm_r_old"):
        out.ClearField(name)
    out.ClearField("comm_r_new")
    out.ClearField("comm_d_new")
    return out


@pytest.mark.parametrize("req", _requests(), ids=lambda r: r.request_id or "unnamed")
def test_the_header_is_protobufs_own_parse_without_the_inputs(req: pb.SubmitProofRequest) -> None:
    data = _prove_bytes(req)
    inp = read_prove(data)
    assert inp.header == _small(req)
    assert inp.size == req.ByteSize() and inp.prove_bytes() is data
    sub = req.SerializeToString()
    by_submit = read_submit(sub)
    assert by_submit.header == _small(req) and by_submit.size == len(sub)
    assert by_submit.prove_bytes() == data  # the frame is ProveRequest.submit's tag and length


def test_repeated_and_unknown_fields_read_as_protobuf_reads_them() -> None:
    # The last request_id wins, an unknown varint field and an unknown
    # length-delimited one are skipped or kept as protobuf does.
    sub = (
        sample_porep(1).SerializeToString()
        + b"\x0a\x03abc"  # request_id again: "abc" wins
        + b"\xa0\x06\x07"  # field 100, varint 7: unknown
        + b"\xa2\x06\x02zz"  # field 100... as bytes: unknown
        + b"\x10\x02"  # proof_kind again: 2 wins
    )
    full = pb.SubmitProofRequest.FromString(sub)
    header = read_submit(sub).header
    assert (header.request_id, header.proof_kind, header.sector_number) == ("abc", 2, 1)
    assert (header.request_id, header.proof_kind) == (full.request_id, full.proof_kind)


def test_a_prove_request_that_is_not_one_submit_field_is_merged_as_protobuf_merges_it() -> None:
    a = pb.ProveRequest(submit=pb.SubmitProofRequest(request_id="x", sector_number=4))
    b = pb.ProveRequest(submit=pb.SubmitProofRequest(miner_id=9, vanilla_proof=b"v" * 10))
    data = a.SerializeToString() + b.SerializeToString()
    inp = read_prove(data)
    full = pb.ProveRequest.FromString(data)
    assert (inp.header.request_id, inp.header.sector_number, inp.header.miner_id) == ("x", 4, 9)
    assert inp.prove_bytes() == full.SerializeToString() and inp.size == full.submit.ByteSize()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "missing submit field"),
        (b"\x12\x00", "missing submit field"),  # only an unknown field 2
        (b"\x0a\x05\x0a\x01", "malformed"),  # submit's length past the end
        (b"\x0a\x02\x08\xff", "malformed"),  # a varint that does not end
        (b"\x0a\x01\x0b", "malformed"),  # wire type 3 (a group)
        (b"\x0a\x03\x0a\x01\xff", "malformed"),  # request_id not UTF-8
    ],
)
def test_malformed_requests_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(MalformedInput, match=message):
        read_prove(data)


def test_the_frame_is_field_1s_tag_and_varint_length() -> None:
    for size in (0, 1, 127, 128, 300, 50 * 1024 * 1024, 2**35):
        assert frame(size) == pb.ProveRequest(submit=pb.SubmitProofRequest()).SerializeToString()[
            :1
        ] + _varint(size)
    assert len(frame(2**64 - 1)) == 11


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


# -- the router with members that keep what they are sent -------------------


@dataclass
class _Member:
    """A member client in this process: it answers GetStatus (one GPU, porep-32g)
    and keeps each Prove's request object; `fail_first` fails its first."""

    fail_first: bool = False
    received: list[bytes] = field(default_factory=list)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    async def ProveRaw(self, request: bytes, **kw: Any) -> pb.ProveResponse:
        self.received.append(request)
        if self.fail_first and len(self.received) == 1:
            return pb.ProveResponse(result=pb.AwaitProofResponse(status=FAILED))
        await self.release.wait()
        return pb.ProveResponse(result=pb.AwaitProofResponse(status=COMPLETED, proof=b"p" * 8))

    async def GetStatus(self, request: pb.GetStatusRequest, **kw: Any) -> pb.GetStatusResponse:
        return pb.GetStatusResponse(
            gpus=[pb.GPUStatus(ordinal=0)], loaded_srs=[pb.SRSStatus(circuit_id="porep-32g")]
        )

    async def CancelProof(self, request: pb.CancelProofRequest, **kw: Any) -> Any:
        return pb.CancelProofResponse()

    async def PreloadSRS(self, request: pb.PreloadSrsRequest, **kw: Any) -> Any:
        return pb.PreloadSrsResponse(already_loaded=True)


@asynccontextmanager
async def _router(members: list[_Member], **cfg: Any) -> AsyncIterator[tuple[Router, int]]:
    by_id = {i + 1: m for i, m in enumerate(members)}
    router = Router(with_config(**cfg) if cfg else FAST, lambda spec: by_id[spec.instance_id])
    await router.start()
    server, port = await start_server("127.0.0.1:0", router)
    router.set_members(
        [MemberSpec(instance_id=i, label=f"m{i}", address=f"10.0.0.{i}:1") for i in by_id]
    )
    try:
        await wait_until(
            lambda: all(w.phase == "serving" for w in router.witness()), what="members serving"
        )
        yield router, port
    finally:
        for m in members:
            m.release.set()
        await server.stop(None)
        await router.close()


async def test_every_attempt_is_sent_the_very_bytes_curio_sent() -> None:
    first, second = _Member(fail_first=True), _Member()
    second.release.set()
    async with _router([first, second]) as (router, port):
        data = _prove_bytes(sample_porep(1, size=100_000))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as ch:
            resp = await ProvingEngineStub(ch).ProveRaw(data, timeout=5)
        assert resp.result.status == COMPLETED
        # Two attempts (the first machine failed it): the same object both times.
        sent = first.received + second.received
        assert len(sent) == 2 and sent[0] is sent[1]
        assert sent[0] == data
        assert router.attempt_outcomes == {"failed": 1, "done": 1}


async def test_a_submitted_input_is_framed_once_and_that_copy_is_sent_every_time() -> None:
    first, second = _Member(fail_first=True), _Member()
    second.release.set()
    async with _router([first, second]) as (_, port):
        req = sample_porep(2, size=100_000)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as ch:
            stub = ProvingEngineStub(ch)
            sub = await stub.SubmitProof(req, timeout=5)
            assert sub.job_id == req.request_id
            got = await stub.AwaitProof(pb.AwaitProofRequest(job_id=sub.job_id), timeout=5)
        assert got.status == COMPLETED
        sent = first.received + second.received
        assert len(sent) == 2 and sent[0] is sent[1] and sent[0] == _prove_bytes(req)


async def test_malformed_or_empty_prove_is_invalid_argument() -> None:
    async with (
        _router([_Member()]) as (_, port),
        grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as ch,
    ):
        stub = ProvingEngineStub(ch)
        for data, text in ((b"", "missing submit field"), (b"\x0a\x05\x0a", "malformed")):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.ProveRaw(data, timeout=5)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert text in (err.value.details() or "")


async def test_the_router_holds_about_one_copy_of_each_input_in_flight() -> None:
    """N inputs go through the router's gRPC server to members that keep them:
    the router's Python allocations over the whole run stay under 1.5 times the
    inputs, and with all of them on machines under 1.2 times (one copy each;
    gRPC's receive makes a second, briefly, of one message at a time)."""
    n, size = 8, 4 * 1024 * 1024
    members = [_Member() for _ in range(4)]  # one GPU each: 2 jobs each
    async with _router(members, expected_seconds={"porep-c2": 30.0}) as (router, port):
        inputs = [_prove_bytes(sample_porep(k, size=size)) for k in range(n)]
        total = sum(len(b) for b in inputs)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as ch:
            stub = ProvingEngineStub(ch)  # ProveRaw: this side makes no Python copy
            gc.collect()
            tracemalloc.start()
            try:
                base = tracemalloc.get_traced_memory()[0]
                calls = [asyncio.ensure_future(stub.ProveRaw(b, timeout=30)) for b in inputs]
                await wait_until(
                    lambda: sum(len(m.received) for m in members) == n,
                    timeout=20,
                    what="every input on a member",
                )
                held, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            for m in members:
                m.release.set()
            assert all(r.result.status == COMPLETED for r in await asyncio.gather(*calls))
        assert router.queue().held_bytes == 0
        # What gRPC freed receiving them went back to the system (router/memory.py).
        await wait_until(lambda: router.trims >= 1, what="a malloc_trim after the arrivals")
        print(f"in flight {(held - base) / total:.2f}, peak {(peak - base) / total:.2f} x inputs")
        assert (held - base) / total < 1.2
        assert (peak - base) / total < 1.5


# -- over real gRPC to a member --------------------------------------------


class _Recorder:
    """A member's cuzk that keeps the raw bytes of each Prove
    (add_raw_input_servicer) and answers COMPLETED."""

    def __init__(self) -> None:
        self.proves: list[bytes] = []

    async def Prove(self, request: bytes, context: _Ctx) -> pb.ProveResponse:
        self.proves.append(request)
        return pb.ProveResponse(result=pb.AwaitProofResponse(status=COMPLETED, proof=b"p"))

    async def SubmitProof(self, request: bytes, context: _Ctx) -> pb.SubmitProofResponse:
        raise NotImplementedError

    async def GetStatus(self, request: pb.GetStatusRequest, context: _Ctx) -> Any:
        return pb.GetStatusResponse(
            gpus=[pb.GPUStatus(ordinal=0)], loaded_srs=[pb.SRSStatus(circuit_id="porep-32g")]
        )

    async def PreloadSRS(self, request: pb.PreloadSrsRequest, context: _Ctx) -> Any:
        return pb.PreloadSrsResponse(already_loaded=True)

    async def AwaitProof(self, request: Any, context: _Ctx) -> Any:
        raise NotImplementedError

    async def CancelProof(self, request: Any, context: _Ctx) -> Any:
        return pb.CancelProofResponse()

    async def GetMetrics(self, request: Any, context: _Ctx) -> Any:
        raise NotImplementedError

    async def EvictSRS(self, request: Any, context: _Ctx) -> Any:
        raise NotImplementedError


async def test_a_member_receives_byte_for_byte_what_curio_sent() -> None:
    recorder = _Recorder()
    member = grpc.aio.server(options=channel_options())
    add_raw_input_servicer(member, recorder)
    member_port = member.add_insecure_port("127.0.0.1:0")
    await member.start()
    router = Router(FAST, insecure_connect)
    await router.start()
    server, port = await start_server("127.0.0.1:0", router)
    router.set_members([MemberSpec(instance_id=1, label="m1", address=f"127.0.0.1:{member_port}")])
    try:
        await wait_until(lambda: router.witness()[0].phase == "serving", what="serving")
        req = sample_porep(3, size=300_000)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as ch:
            # Curio's own call: a unary Prove of the message.
            resp = await ProvingEngineStub(ch).Prove(pb.ProveRequest(submit=req), timeout=5)
        assert resp.result.status == COMPLETED
        assert recorder.proves == [_prove_bytes(req)]
    finally:
        await server.stop(None)
        await router.close()
        await member.stop(None)
