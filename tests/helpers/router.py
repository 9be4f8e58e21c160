"""A router in front of cuzk stand-ins on loopback, and Curio's side of the calls.

`Fleet` starts N stand-ins (simulator/cuzk), a `Router` with fast settings
and its gRPC server, and a channel to it with Curio's message limits; the
tests call the router with `ProvingEngineStub` as Curio's client does
(curio ``lib/cuzk/client.go``: unary Prove with a deadline, statuses other
than COMPLETED are errors) and verify each proof as Curio does afterwards
(``simulator.snark.verify``, standing in for ``ffi.VerifySeal``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

import grpc
import grpc.aio

from fleet_agent.cuzk.service import ProvingEngineStub, channel_options, pb
from fleet_agent.cuzk.witness import MachineWitness, MemberSpec
from router.config import RouterConfig
from router.engine import Router
from router.members import Member, insecure_connect
from router.server import start_server
from router.witness import WitnessBook
from simulator import snark
from simulator.cuzk import Behaviour, CuzkStandIn, StandInConfig

__all__ = [
    "FAST",
    "Fleet",
    "curio_prove",
    "prove_verified",
    "standin",
    "verified",
    "wait_until",
    "with_config",
]

#: Router settings for tests: proofs of 0.05-0.3 s (an attempt gets 1.5 s),
#: polls every 20 ms.
FAST = RouterConfig(
    min_attempt_s=0.05,
    attempt_factor=3.0,
    expected_seconds={"porep-c2": 0.5, "snap-update": 0.5, "window-post": 0.5, "winning-post": 0.5},
    poll_s=0.02,
    tick_s=0.02,
    status_timeout_s=0.5,
    dead_after_s=1.0,
    answer_margin_s=0.02,
    preload_timeout_s=2.0,
)


class NoClient:
    """A member's cuzk client that is never called (the pure rules' tests)."""

    async def Prove(self, request: Any, **kw: Any) -> Any: ...
    async def ProveRaw(self, request: Any, **kw: Any) -> Any: ...
    async def GetStatus(self, request: Any, **kw: Any) -> Any: ...
    async def CancelProof(self, request: Any, **kw: Any) -> Any: ...
    async def PreloadSRS(self, request: Any, **kw: Any) -> Any: ...


def member_spec(i: int, **kw: Any) -> MemberSpec:
    """Machine `i` as the agent lists it (the rest of MemberSpec from `kw`)."""
    return MemberSpec(instance_id=i, label=f"m{i}", address=f"10.0.0.{i}:9821", **kw)


def answered_member(spec: MemberSpec, gpus: int, cfg: RouterConfig) -> Member:
    """A member whose cuzk answered GetStatus at time 0 with `gpus` GPUs and
    the PoRep circuit loaded."""
    m = Member(spec, NoClient(), 0.0, WitnessBook(cfg.rate_window_s))
    m.observe_status(
        0.0,
        pb.GetStatusResponse(
            gpus=[pb.GPUStatus(ordinal=k) for k in range(gpus)],
            loaded_srs=[pb.SRSStatus(circuit_id="porep-32g")],
        ),
        cfg,
    )
    return m


def standin(
    proof_s: float = 0.1, mode: str = "honest", gpus: int = 1, **behaviour: object
) -> StandInConfig:
    """A stand-in proving a PoRep in `proof_s` seconds, behaving as `mode`."""
    return StandInConfig(
        gpus=gpus,
        proof_seconds={"porep-c2": proof_s, "snap-update": proof_s},
        preload_seconds=0.05,
        behaviour=Behaviour(mode=mode, **behaviour),  # type: ignore[arg-type]
    )


async def curio_prove(
    stub: ProvingEngineStub, req: pb.SubmitProofRequest, timeout: float = 5.0
) -> pb.AwaitProofResponse:
    """Prove as Curio's client does; raises RuntimeError for a non-COMPLETED status."""
    resp = await stub.Prove(pb.ProveRequest(submit=req), timeout=timeout)
    if resp.result.status != pb.AwaitProofResponse.COMPLETED:
        raise RuntimeError(f"cuzk proof status {resp.result.status}: {resp.result.error_message}")
    return resp.result


async def wait_until(cond: Callable[[], bool], timeout: float = 3.0, what: str = "") -> None:
    """Poll `cond` until true; AssertionError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.01)


@dataclass
class Fleet:
    """Stand-ins, the router in front of them, and Curio's stub to the router."""

    configs: list[StandInConfig]
    config: RouterConfig = FAST
    clock: Callable[[], float] = time.time
    standins: list[CuzkStandIn] = field(default_factory=list)
    specs: list[MemberSpec] = field(default_factory=list)
    router: Router = field(init=False)
    stub: ProvingEngineStub = field(init=False)
    _server: grpc.aio.Server = field(init=False)
    _channel: grpc.aio.Channel = field(init=False)

    async def __aenter__(self) -> Fleet:
        for i, cfg in enumerate(self.configs):
            s = await CuzkStandIn.start(cfg)
            self.standins.append(s)
            self.specs.append(MemberSpec(instance_id=i + 1, label=f"m{i + 1}", address=s.address))
        self.router = Router(self.config, insecure_connect, self.clock)
        await self.router.start()
        self._server, port = await start_server("127.0.0.1:0", self.router)
        self._channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options())
        self.stub = ProvingEngineStub(self._channel)
        self.router.set_members(self.specs)
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._channel.close(None)
        await self._server.stop(None)
        await self.router.close()
        for s in self.standins:
            await s.stop()

    def witness(self, instance_id: int) -> MachineWitness:
        """The router's witness row of member `instance_id`."""
        return next(w for w in self.router.witness() if w.instance_id == instance_id)

    async def serving(self, *ids: int) -> None:
        """Wait until members `ids` (all, by default) are serving."""
        want = set(ids or (spec.instance_id for spec in self.specs))
        await wait_until(
            lambda: want <= {w.instance_id for w in self.router.witness() if w.phase == "serving"},
            what=f"members {sorted(want)} serving",
        )

    def drain(self, instance_id: int, **kw: object) -> None:
        """Tell the router member `instance_id` is to drain."""
        self.specs = [
            s.model_copy(update={"want": "drain", **kw}) if s.instance_id == instance_id else s
            for s in self.specs
        ]
        self.router.set_members(self.specs)


async def prove_verified(f: Fleet, req: pb.SubmitProofRequest) -> pb.AwaitProofResponse:
    """Prove `req` as Curio does: verify, and send it again while verification fails
    (harmony retries the task with the same request id)."""
    for _ in range(5):
        result = await curio_prove(f.stub, req)
        if verified(req, result):
            return result
    raise AssertionError(f"{req.request_id} never verified")


def verified(req: pb.SubmitProofRequest, result: pb.AwaitProofResponse) -> bool:
    """Curio's local check of the proof it got (snark.verify)."""
    return snark.verify(req, result.proof)


def with_config(**kw: object) -> RouterConfig:
    """FAST with some settings changed."""
    return replace(FAST, **kw)  # type: ignore[arg-type]
