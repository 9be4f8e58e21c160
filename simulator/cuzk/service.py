"""The stand-in's ``cuzk.v1.ProvingEngine`` servicer, answer for answer cuzk's.

Follows curio ``extern/cuzk/cuzk-server/src/service.rs``: an invalid kind is
INVALID_ARGUMENT ``invalid proof_kind: N``; Prove without ``submit`` is
INVALID_ARGUMENT ``missing submit field``; AwaitProof of an unknown id is
NOT_FOUND (``timeout_ms`` is not read); CancelProof and EvictSRS are not
implemented there (``was_running``/``was_loaded`` false); GetStatus lists
loaded SRS as HOT with size 0, one QueueStatus per kind *waiting* (its
Display name, pending and in-progress), one GPUStatus per worker; GetMetrics
is its Prometheus text. A ``lies`` stand-in's GetStatus claims huge totals
and many idle GPUs; a ``trickle`` one waits before every answer.
"""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio

from fleet_agent.cuzk.kinds import KIND_NAMES, METRIC_LABELS
from fleet_agent.cuzk.service import pb

from .config import Behaviour
from .engine import JobNotFound, StandInEngine

__all__ = ["StandInService"]

_Ctx = grpc.aio.ServicerContext[Any, Any]


class StandInService:
    """Serves one `StandInEngine` (register with ``add_servicer``)."""

    def __init__(self, engine: StandInEngine) -> None:
        self.engine = engine

    @property
    def behaviour(self) -> Behaviour:
        """The engine's behaviour now (it may change while the stand-in runs)."""
        return self.engine.config.behaviour

    async def _trickle(self) -> None:
        if self.behaviour.mode == "trickle":
            await self.engine.sleep(self.behaviour.trickle_s)

    async def _check_kind(self, req: pb.SubmitProofRequest, context: _Ctx) -> None:
        if req.proof_kind not in KIND_NAMES:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"invalid proof_kind: {req.proof_kind}"
            )

    async def SubmitProof(
        self, request: pb.SubmitProofRequest, context: _Ctx
    ) -> pb.SubmitProofResponse:
        """Queue a proof; the job id is its request id."""
        await self._trickle()
        await self._check_kind(request, context)
        job_id, position = self.engine.submit(request)
        return pb.SubmitProofResponse(job_id=job_id, queue_position=position, assigned_gpu="")

    async def AwaitProof(
        self, request: pb.AwaitProofRequest, context: _Ctx
    ) -> pb.AwaitProofResponse:
        """Wait for a queued proof (``timeout_ms`` ignored, as cuzk does)."""
        await self._trickle()
        try:
            return await self.engine.await_proof(request.job_id)
        except JobNotFound:
            await context.abort(grpc.StatusCode.NOT_FOUND, f"job not found: {request.job_id}")
            raise  # abort raises; this line is for the type checker

    async def Prove(self, request: pb.ProveRequest, context: _Ctx) -> pb.ProveResponse:
        """Submit and wait in one call (what Curio uses)."""
        await self._trickle()
        if not request.HasField("submit"):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "missing submit field")
        await self._check_kind(request.submit, context)
        result = await self.engine.prove(request.submit)
        return pb.ProveResponse(result=result)

    async def CancelProof(
        self, request: pb.CancelProofRequest, context: _Ctx
    ) -> pb.CancelProofResponse:
        """Not implemented in cuzk's phase 0: nothing is cancelled."""
        await self._trickle()
        return pb.CancelProofResponse(was_running=False)

    async def GetStatus(self, request: pb.GetStatusRequest, context: _Ctx) -> pb.GetStatusResponse:
        """Loaded circuits, waiting queues, GPUs and totals (a liar's are made up)."""
        await self._trickle()
        e, cfg = self.engine, self.engine.config
        srs = [pb.SRSStatus(circuit_id=c, tier=pb.SRSStatus.HOT) for c in e.preloaded]
        running: dict[str, int] = {}
        for w in e.workers:
            if w.current is not None:
                running[w.current[1]] = running.get(w.current[1], 0) + 1
        queues = [
            pb.QueueStatus(
                proof_kind=KIND_NAMES[kind],
                pending=count,
                in_progress=running.get(KIND_NAMES[kind], 0),
            )
            for kind, count in e.queue_stats()
        ]
        gpus = [
            pb.GPUStatus(
                ordinal=w.ordinal,
                name=cfg.gpu_name,
                vram_total_bytes=cfg.vram_total_bytes,
                vram_free_bytes=cfg.vram_total_bytes // 4,
                current_job_id=w.current[0] if w.current else "",
                current_proof_kind=w.current[1] if w.current else "",
            )
            for w in e.workers
        ]
        completed, failed = e.total_completed, e.total_failed
        if self.behaviour.mode == "lies":
            b = self.behaviour
            gpus = [
                pb.GPUStatus(
                    ordinal=i,
                    name=cfg.gpu_name,
                    vram_total_bytes=cfg.vram_total_bytes,
                    vram_free_bytes=cfg.vram_total_bytes,
                )
                for i in range(b.claimed_gpus)
            ]
            queues, completed, failed = [], b.claimed_total, 0
        return pb.GetStatusResponse(
            gpus=gpus,
            loaded_srs=srs,
            queues=queues,
            total_proofs_completed=completed,
            total_proofs_failed=failed,
            uptime_seconds=e.uptime_seconds(),
        )

    async def GetMetrics(
        self, request: pb.GetMetricsRequest, context: _Ctx
    ) -> pb.GetMetricsResponse:
        """cuzk's Prometheus text (service.rs ``get_metrics``), line for line."""
        await self._trickle()
        return pb.GetMetricsResponse(prometheus_text=metrics_text(self.engine))

    async def PreloadSRS(
        self, request: pb.PreloadSrsRequest, context: _Ctx
    ) -> pb.PreloadSrsResponse:
        """Load a circuit after the configured delay (INTERNAL for an unknown id)."""
        await self._trickle()
        try:
            already, ms = await self.engine.preload(request.circuit_id)
        except ValueError as err:
            await context.abort(grpc.StatusCode.INTERNAL, str(err))
            raise
        return pb.PreloadSrsResponse(already_loaded=already, load_time_ms=ms)

    async def EvictSRS(self, request: pb.EvictSrsRequest, context: _Ctx) -> pb.EvictSrsResponse:
        """Not implemented in cuzk's phase 0: nothing is evicted."""
        await self._trickle()
        return pb.EvictSrsResponse(was_loaded=False, freed_bytes=0)


def metrics_text(e: StandInEngine) -> str:
    """The engine's counters in cuzk's exposition format."""
    lines = [
        "# HELP cuzk_proofs_completed_total Total proofs completed",
        "# TYPE cuzk_proofs_completed_total counter",
        f"cuzk_proofs_completed_total {e.total_completed}",
        "# HELP cuzk_proofs_failed_total Total proofs failed",
        "# TYPE cuzk_proofs_failed_total counter",
        f"cuzk_proofs_failed_total {e.total_failed}",
        "# HELP cuzk_uptime_seconds Daemon uptime",
        "# TYPE cuzk_uptime_seconds gauge",
        f"cuzk_uptime_seconds {e.uptime_seconds()}",
        "# HELP cuzk_queue_depth Current queue depth",
        "# TYPE cuzk_queue_depth gauge",
        f"cuzk_queue_depth {sum(n for _, n in e.queue_stats())}",
        "# HELP cuzk_proofs_completed Per proof-kind completions",
        "# TYPE cuzk_proofs_completed counter",
        *(
            f'cuzk_proofs_completed{{proof_kind="{METRIC_LABELS[k]}"}} {n}'
            for k, n in e.completed_by_kind.items()
        ),
        "# HELP cuzk_proofs_failed Per proof-kind failures",
        "# TYPE cuzk_proofs_failed counter",
        *(
            f'cuzk_proofs_failed{{proof_kind="{METRIC_LABELS[k]}"}} {n}'
            for k, n in e.failed_by_kind.items()
        ),
    ]
    if e.recent_durations:
        lines += [
            "# HELP cuzk_proof_duration_seconds Proof duration",
            "# TYPE cuzk_proof_duration_seconds summary",
        ]
        sums: dict[int, tuple[int, float]] = {}
        for k, d in e.recent_durations:
            n, s = sums.get(k, (0, 0.0))
            sums[k] = (n + 1, s + d)
        for k, (n, s) in sums.items():
            label = METRIC_LABELS[k]
            lines.append(f'cuzk_proof_duration_seconds_count{{proof_kind="{label}"}} {n}')
            lines.append(f'cuzk_proof_duration_seconds_sum{{proof_kind="{label}"}} {s:.3f}')
    running = sum(1 for w in e.workers if w.current is not None)
    lines += [
        "# HELP cuzk_running_jobs Currently running proofs",
        "# TYPE cuzk_running_jobs gauge",
        f"cuzk_running_jobs {running}",
        "# HELP cuzk_gpu_workers Number of GPU workers",
        "# TYPE cuzk_gpu_workers gauge",
        f"cuzk_gpu_workers {len(e.workers)}",
    ]
    return "\n".join(lines) + "\n"
