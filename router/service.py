"""The router's ``cuzk.v1.ProvingEngine`` servicer: what Curio's client talks to.

Errors are cuzk's (curio ``extern/cuzk/cuzk-server/src/service.rs``): an
invalid kind is INVALID_ARGUMENT ``invalid proof_kind: N``, Prove without
``submit`` INVALID_ARGUMENT ``missing submit field``, AwaitProof of an unknown
job NOT_FOUND. The router's own: a Submit or Prove past the held-bytes cap is
RESOURCE_EXHAUSTED (Curio's task fails and harmony retries it later). A
Prove's gRPC deadline is its job's deadline. Register with
``fleet_agent.cuzk.service.add_raw_input_servicer``:
SubmitProof and Prove get their requests' wire bytes, read by
router/inputs.py (a 50-200 MB input is held once, never parsed); a request
protobuf cannot parse is INVALID_ARGUMENT.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import grpc
import grpc.aio

from fleet_agent.cuzk.kinds import KNOWN_CIRCUITS
from fleet_agent.cuzk.service import pb

from .engine import Router
from .inputs import MalformedInput, ProofInput, read_prove, read_submit
from .jobs import Admission, HeldBytesFull, InvalidRequest
from .status import fleet_status, metrics_text

__all__ = ["RouterService"]

_Ctx = grpc.aio.ServicerContext[Any, Any]


async def _abort(context: _Ctx, code: grpc.StatusCode, message: str) -> NoReturn:
    await context.abort(code, message)
    raise AssertionError("abort returned")  # pragma: no cover


class RouterService:
    """Serves one `Router`."""

    def __init__(self, router: Router) -> None:
        self.router = router

    async def _admit(
        self,
        read: Callable[[bytes], ProofInput],
        data: bytes,
        context: _Ctx,
        time_remaining: float | None,
    ) -> Admission:
        try:
            return self.router.admit(read(data), time_remaining)
        except (InvalidRequest, MalformedInput) as err:
            await _abort(context, grpc.StatusCode.INVALID_ARGUMENT, str(err))
        except HeldBytesFull as err:
            await _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(err))

    async def SubmitProof(self, request: bytes, context: _Ctx) -> pb.SubmitProofResponse:
        """Admit a proof (`request`: a SubmitProofRequest's bytes); the job id is
        its request id. Its deadline is the router's default: a Submit's own
        deadline is only the call's."""
        adm = await self._admit(read_submit, request, context, None)
        job_id = adm.job.job_id if adm.job is not None else adm.answer.job_id if adm.answer else ""
        position = len(self.router.jobs.pending())
        return pb.SubmitProofResponse(job_id=job_id, queue_position=position, assigned_gpu="")

    async def AwaitProof(
        self, request: pb.AwaitProofRequest, context: _Ctx
    ) -> pb.AwaitProofResponse:
        """Wait for a job's answer (``timeout_ms`` is not read, as in cuzk)."""
        adm = self.router.find(request.job_id)
        if adm is None:
            await _abort(context, grpc.StatusCode.NOT_FOUND, f"job not found: {request.job_id}")
        return await self.router.wait(adm)

    async def Prove(self, request: bytes, context: _Ctx) -> pb.ProveResponse:
        """Prove and answer, within the call's deadline (`request`: a
        ProveRequest's bytes, which become the job's payload as they are)."""
        adm = await self._admit(read_prove, request, context, context.time_remaining())
        return pb.ProveResponse(result=await self.router.wait(adm))

    async def CancelProof(
        self, request: pb.CancelProofRequest, context: _Ctx
    ) -> pb.CancelProofResponse:
        """Cancel a job at the router: its callers get CANCELLED."""
        return pb.CancelProofResponse(was_running=self.router.cancel(request.job_id))

    async def GetStatus(self, request: pb.GetStatusRequest, context: _Ctx) -> pb.GetStatusResponse:
        """The fleet as one daemon (status.py)."""
        return fleet_status(self.router)

    async def GetMetrics(
        self, request: pb.GetMetricsRequest, context: _Ctx
    ) -> pb.GetMetricsResponse:
        """The router's own counters."""
        return pb.GetMetricsResponse(prometheus_text=metrics_text(self.router))

    async def PreloadSRS(
        self, request: pb.PreloadSrsRequest, context: _Ctx
    ) -> pb.PreloadSrsResponse:
        """Ask every member to load a circuit; says whether a serving one has it.
        An id cuzk does not know is INTERNAL, as there (engine.rs preload_srs)."""
        if request.circuit_id not in KNOWN_CIRCUITS:
            await _abort(
                context, grpc.StatusCode.INTERNAL, f"unknown circuit ID: {request.circuit_id}"
            )
        self.router.extra_circuits.add(request.circuit_id)
        loaded = any(
            m.phase == "serving" and request.circuit_id in m.circuits for m in self.router.members
        )
        return pb.PreloadSrsResponse(already_loaded=loaded, load_time_ms=0)

    async def EvictSRS(self, request: pb.EvictSrsRequest, context: _Ctx) -> pb.EvictSrsResponse:
        """Stop asking members for a circuit PreloadSRS added (cuzk evicts nothing)."""
        was = request.circuit_id in self.router.extra_circuits
        self.router.extra_circuits.discard(request.circuit_id)
        return pb.EvictSrsResponse(was_loaded=was, freed_bytes=0)
