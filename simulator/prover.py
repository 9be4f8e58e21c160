"""The simulated prover: what it can do on a host, and the status it serves.

Every simulated instance runs the prover image. It starts when the image's
ENTRYPOINT runs (runtype ``args``) or when ``onstart`` starts it (the ``ssh``
and ``jupyter`` runtypes replace the ENTRYPOINT, so without an ``onstart``
nothing proves: we cannot read a shell script, so any ``onstart`` counts).
Its status is served over HTTP on the container port the ``PROVER_STATUS_PORT``
variable names (default `PROVER_STATUS_PORT`, which the image EXPOSEs, so
vast.ai maps it like a ``-p`` request): ``GET /status`` answers `status_body`.
The shape is documented in docs/SIMULATOR.md, "Prover status endpoint".
"""

from __future__ import annotations

import math
from typing import Any

from fleet_agent.fleet.capacity import (
    BASELINE_RAM_PER_PROOF_GIB,
    GPU_PROVING,
    MIN_COMPUTE_CAP,
    MIN_GPU_RAM_MB,
    concurrent_proofs,
    engine,
    min_cuda,
    proofs_per_hour,
)
from fleet_agent.vast.models import slice_ram_mb

from .fate import PARAMS_BYTES, PROVER_CUDA
from .lifecycle import Machine

__all__ = [
    "PROVER_STATUS_PATH",
    "PROVER_STATUS_PORT",
    "STATUS_PORT_VARIABLE",
    "offer_proof_rate",
    "prover_blocker",
    "starts_prover",
    "status_body",
    "status_port",
]

#: Container port of the prover's status endpoint (the image's default, and
#: what it EXPOSEs), the variable that moves it, and the endpoint's path.
PROVER_STATUS_PORT = 9100
STATUS_PORT_VARIABLE = "PROVER_STATUS_PORT"
PROVER_STATUS_PATH = "/status"


def status_port(env: dict[str, str]) -> int:
    """The container port the prover serves its status on, given the create's env."""
    raw = env.get(STATUS_PORT_VARIABLE, "")
    return int(raw) if raw.isdigit() and 0 < int(raw) < 65536 else PROVER_STATUS_PORT


def starts_prover(runtype: str | None, onstart: str | None) -> bool:
    """Whether the container starts the prover: the image's own ENTRYPOINT
    (runtype ``args``), or an ``onstart`` in the runtypes that replace it."""
    if (runtype or "ssh") == "args":
        return True
    return bool(onstart and onstart.strip())


def rental_ram_mb(offer: dict[str, Any]) -> float:
    """RAM a rental of `offer` gets, MB: its share of the host's (the row
    lists the host's ``cpu_ram`` and the share ``gpu_frac``, as vast.ai does)."""
    return slice_ram_mb(float(offer["cpu_ram"]), offer.get("gpu_frac"))


def offer_proof_rate(offer: dict[str, Any]) -> float:
    """Proofs/h the rental of `offer` sustains (before the instance's jitter)."""
    return proofs_per_hour(
        offer["gpu_name"],
        int(offer["num_gpus"]),
        rental_ram_mb(offer),
        float(offer["cpu_cores_effective"]),
    )


def prover_blocker(offer: dict[str, Any]) -> str | None:
    """The error a prover hits at start on this host, or None if it can prove."""
    cuda = float(offer.get("cuda_max_good") or 0.0)
    # The image is built with a CUDA new enough for every GPU it runs on: a
    # card of a newer architecture needs that CUDA from the driver too.
    need = max(PROVER_CUDA, min_cuda(offer["gpu_name"], offer.get("compute_cap")))
    if cuda < need:
        return (
            "CUDA driver version is insufficient for CUDA runtime version "
            f"(the host's driver runs CUDA {cuda:g}, the prover needs {need:g} "
            f"on a {offer['gpu_name']})"
        )
    gpu = GPU_PROVING.get(offer["gpu_name"])
    vram = gpu.vram_mb if gpu else int(offer.get("gpu_ram") or 0)
    if vram < MIN_GPU_RAM_MB:
        return f"CUDA error 2: out of memory (the GPU has {vram} MB; a proof needs ~11 GB)"
    if gpu is not None and gpu.compute_cap < MIN_COMPUTE_CAP:
        return (
            "CUDA error 209: no kernel image is available for execution on the device "
            f"(compute capability {gpu.compute_cap / 100:g})"
        )
    ram_gib = rental_ram_mb(offer) / 1024.0
    if ram_gib < BASELINE_RAM_PER_PROOF_GIB:
        return (
            f"prover killed: out of memory (the rental has {ram_gib:.0f} GiB of RAM; "
            f"one proof needs about {BASELINE_RAM_PER_PROOF_GIB:.0f} GiB)"
        )
    if offer_proof_rate(offer) <= 0:
        return "prover cannot run on this host"
    return None


def status_body(
    machine: Machine, offer: dict[str, Any], now: float, work_share: float = 1.0
) -> dict[str, Any]:
    """What ``GET /status`` answers for a running instance's prover; the work
    source hands out `work_share` of its capacity (Faults.work_share)."""
    phase = machine.phase if machine.phase != "off" else "starting"
    in_flight = queued = 0
    if phase == "proving" and machine.draining:
        # No new work; what it held finishes (lifecycle.Machine.drain).
        target = machine.drain_target or 0.0
        in_flight = max(0, math.ceil(target - machine.proofs - 1e-9))
    elif phase == "proving" and (work_share > 0 or machine.stuck):
        gpus = int(offer["num_gpus"])
        in_flight = concurrent_proofs(offer["gpu_name"], gpus, rental_ram_mb(offer))
        # A full share keeps a queue waiting (the node fills it ahead); less
        # than that, each piece of work is taken as it comes.
        queued = in_flight if work_share >= 1.0 else 0
    started = machine.prover_started_at
    return {
        "phase": phase,
        # Counters of this prover process: a restart starts them again at 0.
        "proofs_completed": math.floor(machine.proofs) - machine.proofs_at_start,
        "proofs_in_flight": in_flight,
        "draining": machine.draining,
        "work_queued": queued,
        # Seconds this process had work in flight, now and at its last proof.
        "busy_seconds": round(machine.busy_s - machine.busy_at_start, 3),
        "last_proof_busy_seconds": (
            round(machine.last_proof_busy_s - machine.busy_at_start, 3)
            if machine.last_proof_busy_s is not None
            else None
        ),
        "proofs_failed": machine.proofs_failed - machine.failed_at_start,
        "last_proof_at": machine.last_proof_at,
        "started_at": started,
        "uptime_s": round(now - started, 3) if started is not None else 0.0,
        "params": {
            "bytes_total": PARAMS_BYTES,
            "bytes_fetched": int(machine.params_bytes),
            "ready": machine.params_bytes >= PARAMS_BYTES,
        },
        "detail": _detail(machine, phase),
        "engine": engine(offer["gpu_name"], int(offer["num_gpus"]), rental_ram_mb(offer)) or None,
        "gpus": int(offer["num_gpus"]),
        "time": now,
    }


def _detail(machine: Machine, phase: str) -> str:
    """One line on what the prover is doing, or why it stopped."""
    if phase == "error":
        return machine.error or "prover failed"
    if phase == "fetching_params":
        share = machine.params_bytes / PARAMS_BYTES
        return f"fetching proof parameters: {share:.0%} of {PARAMS_BYTES / 1024**3:.0f} GiB"
    if phase == "starting":
        return "loading the proof parameters into memory"
    return "proving 32 GiB PoRep C2"
