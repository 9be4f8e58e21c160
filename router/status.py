"""What the router answers to GetStatus and GetMetrics: the fleet as one cuzk.

GetStatus (shape of curio ``extern/cuzk/cuzk-server/src/service.rs``
``get_status``): one QueueStatus per kind with work (cuzk's Display name;
pending = jobs waiting at the router, in_progress = jobs the router has on
machines, both its own counts), one GPUStatus per counted GPU of each serving
member (renumbered across the fleet, the router's jobs as current), the
circuits loaded on any serving member (HOT, size 0, as cuzk), and the
router's own totals. When the held-bytes cap refused a Submit and nothing
was freed since, pending carries `full_pending` more so Curio's
``HasCapacity`` (curio ``lib/cuzk/client.go``) sees no room.

GetMetrics: the router's own counters in Prometheus text. Reads the router,
changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fleet_agent.cuzk.kinds import KIND_NAMES
from fleet_agent.cuzk.service import pb

if TYPE_CHECKING:
    from .engine import Router

__all__ = ["fleet_status", "metrics_text"]

_FULL_KIND = KIND_NAMES[pb.POREP_SEAL_COMMIT]


def fleet_status(router: Router) -> pb.GetStatusResponse:
    """The fleet's status as one cuzk daemon would give it."""
    now = router.clock()
    pending: dict[str, int] = {}
    running: dict[str, int] = {}
    for job in router.jobs.pending():
        pending[job.kind] = pending.get(job.kind, 0) + 1
    for job in router.jobs.running():
        running[job.kind] = running.get(job.kind, 0) + 1
    if router.jobs.full:
        pending[_FULL_KIND] = pending.get(_FULL_KIND, 0) + router.config.full_pending
    queues = [
        pb.QueueStatus(proof_kind=k, pending=pending.get(k, 0), in_progress=running.get(k, 0))
        for k in KIND_NAMES.values()
        if pending.get(k) or running.get(k)
    ]
    gpus: list[pb.GPUStatus] = []
    circuits: set[str] = set()
    for m in router.members:
        if m.refresh(now, router.config) != "serving":
            continue
        circuits |= m.circuits
        on_it = [router.jobs.live[j] for j in sorted(m.jobs) if j in router.jobs.live]
        for k in range(m.gpus):
            gpu = pb.GPUStatus(ordinal=len(gpus), name=f"{m.spec.label} GPU {k}"[:200])
            if k < len(on_it):
                gpu.current_job_id, gpu.current_proof_kind = on_it[k].job_id, on_it[k].kind
            gpus.append(gpu)
    return pb.GetStatusResponse(
        gpus=gpus,
        loaded_srs=[
            pb.SRSStatus(circuit_id=c, tier=pb.SRSStatus.HOT, size_bytes=0)
            for c in sorted(circuits)
        ],
        queues=queues,
        total_proofs_completed=router.jobs.completed,
        total_proofs_failed=router.jobs.failed,
        uptime_seconds=max(0, int(now - router.started_at)),
    )


def _metric(lines: list[str], name: str, kind: str, help_: str, samples: dict[str, float]) -> None:
    lines.append(f"# HELP {name} {help_}")
    lines.append(f"# TYPE {name} {kind}")
    for labels, value in samples.items():
        lines.append(f"{name}{labels} {value:g}")


def metrics_text(router: Router) -> str:
    """The router's counters and gauges in the Prometheus text format."""
    now = router.clock()
    jobs = router.jobs
    lines: list[str] = []
    counters = {
        "cuzk_router_jobs_submitted_total": ("Jobs started", jobs.submitted),
        "cuzk_router_jobs_joined_total": ("Submissions that joined a job in flight", jobs.joined),
        "cuzk_router_jobs_completed_total": ("Jobs answered COMPLETED", jobs.completed),
        "cuzk_router_jobs_failed_total": ("Jobs answered otherwise", jobs.failed),
        "cuzk_router_refused_total": ("Submissions refused for the held-bytes cap", jobs.refused),
        "cuzk_router_rejections_total": ("Answers Curio sent back (rejected)", jobs.rejections),
        "cuzk_router_redelivered_total": ("Answers given again to a caller", jobs.redelivered),
    }
    for name, (help_, value) in counters.items():
        _metric(lines, name, "counter", help_, {"": value})
    _metric(
        lines,
        "cuzk_router_attempts_total",
        "counter",
        "Sends of a job to a machine, by outcome",
        {f'{{outcome="{k}"}}': v for k, v in sorted(router.attempt_outcomes.items())},
    )
    pending: dict[str, float] = {}
    for job in jobs.pending():
        key = f'{{proof_kind="{job.kind}"}}'
        pending[key] = pending.get(key, 0) + 1
    _metric(lines, "cuzk_router_pending", "gauge", "Jobs waiting for a machine", pending)
    _metric(lines, "cuzk_router_in_flight", "gauge", "Jobs on machines", {"": len(jobs.running())})
    _metric(lines, "cuzk_router_held_bytes", "gauge", "Input bytes held", {"": jobs.held_bytes})
    phases: dict[str, float] = {}
    for m in router.members:
        key = f'{{phase="{m.refresh(now, router.config)}"}}'
        phases[key] = phases.get(key, 0) + 1
    _metric(lines, "cuzk_router_members", "gauge", "Members by phase", phases)
    return "\n".join(lines) + "\n"
