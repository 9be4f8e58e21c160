"""How many 32 GiB PoRep C2 proofs a rented machine completes per hour.

Shared by the simulator (what its machines prove) and the fleet code (what an
offer or a real vast.ai machine, which reports no throughput, is expected to
prove). Sources and the reasoning behind every figure: docs/SIMULATOR.md,
"Proving capacity".

A machine's rate is the smallest of three bounds:

* **GPU, baseline engine** (SupraSeal C2, one process per proof, Curio's
  default ``ffiselect`` path): each proof loads the ~47 GiB SRS (30-90 s),
  synthesizes the circuit on the CPU (~55-65 s) and runs NTT+MSM on the GPU
  (~30-40 s), one after the other (cuzk design notes, curio
  ``extern/cuzk/cuzk-project.md`` and ``cuzk-phase2-design.md``). Each process
  holds its own SRS copy, so a host runs at most one proof per
  `BASELINE_RAM_PER_PROOF_GIB` of RAM, capped at its GPU count.
* **GPU, cuzk engine** (Curio's persistent proving daemon): one resident SRS,
  pipelined partition synthesis; its documentation tabulates seconds per
  proof by host RAM (`CUZK_TIERS`). The machine runs whichever engine proves more.
* **CPU**: synthesis is CPU-bound. A 32 GiB PoRep has 10 partitions, each
  synthesized on its own core in ~55 s (cuzk design notes), so a proof costs
  `SYNTHESIS_CORE_SECONDS` of CPU whatever the engine. A host with few cores
  per GPU cannot feed its GPUs: 8 GPUs on 16 cores prove at most
  ``16 * 3600 / 550`` ~ 105 proofs/h, not 8 x 25.

GPUs with too little memory or too old an architecture cannot run the prover
at all (`MIN_GPU_RAM_MB`, `MIN_COMPUTE_CAP`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet_agent.vast.models import slice_ram_mb

__all__ = [
    "BASELINE_RAM_PER_PROOF_GIB",
    "CUZK_MIN_RAM_GIB",
    "CUZK_TIERS",
    "GPU_PROVING",
    "MIN_COMPUTE_CAP",
    "MIN_GPU_RAM_MB",
    "SYNTHESIS_CORE_SECONDS",
    "GpuProving",
    "baseline_seconds",
    "concurrent_proofs",
    "cpu_bound_proofs_per_hour",
    "engine",
    "min_cuda",
    "proofs_per_hour",
    "record_proofs_per_hour",
    "seconds_per_proof",
]


@dataclass(frozen=True, slots=True)
class GpuProving:
    """What the capacity model needs to know about one GPU model."""

    #: NTT+MSM speed relative to an RTX 3090 (1.0); our estimate from each
    #: card's integer throughput and memory bandwidth.
    speed: float
    #: Memory of one card in MB, as vast.ai lists it (``gpu_ram``).
    vram_mb: int
    #: CUDA compute capability x 100, as vast.ai lists it (``compute_cap``).
    compute_cap: int


#: Every GPU model the simulated market lists. Unknown names (the real market
#: lists more) are estimated with `_UNKNOWN_GPU`.
GPU_PROVING: dict[str, GpuProving] = {
    "GTX 1080 Ti": GpuProving(0.45, 11264, 610),
    "RTX 2080 Ti": GpuProving(0.60, 11264, 750),
    "RTX 3060": GpuProving(0.45, 12288, 860),
    "RTX 3060 Ti": GpuProving(0.55, 8192, 860),
    "RTX 3070": GpuProving(0.60, 8192, 860),
    "RTX 3080": GpuProving(0.85, 10240, 860),
    "RTX 3080 Ti": GpuProving(0.95, 12288, 860),
    "RTX 3090": GpuProving(1.00, 24576, 860),
    "RTX 3090 Ti": GpuProving(1.10, 24564, 860),
    "RTX 4060 Ti": GpuProving(0.60, 16380, 890),
    "RTX 4070": GpuProving(0.80, 12282, 890),
    "RTX 4070 Ti": GpuProving(1.00, 12282, 890),
    "RTX 4080": GpuProving(1.30, 16376, 890),
    "RTX 4080S": GpuProving(1.35, 16376, 890),
    "RTX 4090": GpuProving(1.85, 24564, 890),
    "RTX 5060 Ti": GpuProving(0.70, 16311, 1200),
    "RTX 5070": GpuProving(1.00, 12227, 1200),
    "RTX 5070 Ti": GpuProving(1.25, 16303, 1200),
    "RTX 5080": GpuProving(1.50, 16303, 1200),
    "RTX 5090": GpuProving(2.40, 32607, 1200),
    "RTX A4000": GpuProving(0.55, 16376, 860),
    "RTX A5000": GpuProving(0.80, 24564, 860),
    "RTX A6000": GpuProving(1.00, 49140, 860),
    "RTX 6000Ada": GpuProving(1.70, 49140, 890),
    "Q RTX 8000": GpuProving(0.60, 49152, 750),
    "Tesla T4": GpuProving(0.25, 15360, 750),
    "Tesla V100": GpuProving(0.70, 16384, 700),
    "A10": GpuProving(0.70, 23028, 860),
    "A40": GpuProving(0.95, 46068, 860),
    "L4": GpuProving(0.40, 23034, 890),
    "L40S": GpuProving(1.70, 46068, 890),
    "A100 PCIE": GpuProving(1.10, 40960, 800),
    "A100 SXM4": GpuProving(1.20, 81920, 800),
    "H100 PCIE": GpuProving(1.90, 81559, 900),
    "H100 SXM": GpuProving(2.40, 81559, 900),
    "H100 NVL": GpuProving(2.20, 95830, 900),
    "H200": GpuProving(2.50, 143771, 900),
}
_UNKNOWN_GPU = GpuProving(0.50, 16384, 800)

#: The prover's GPU half needs about this much device memory (cuzk stages
#: ~12 GiB of NTT input per partition; an 8-10 GB card does not fit it).
MIN_GPU_RAM_MB = 11_000
#: SupraSeal's CUDA kernels need Volta (7.0) or newer; our assumption.
MIN_COMPUTE_CAP = 700

#: Baseline engine phases on an RTX 3090, seconds: SRS load (30-90 s; 50 s
#: puts a 3090 at the 145 s this project has worked with), CPU synthesis
#: (~55-65 s) and NTT+MSM on the GPU (~30-40 s).
_SRS_LOAD_S = 50.0
_SYNTHESIS_S = 60.0
_GPU_REFERENCE_S = 35.0

#: CPU seconds one proof's synthesis costs: 10 partitions, ~55 s each on one core.
SYNTHESIS_CORE_SECONDS = 10 * 55.0

#: Host RAM one baseline proof needs: its own ~47 GiB SRS plus the witness and
#: the OS (our assumption). Compared with the RAM the host reports, which is a
#: few percent under its nominal size, so a "64 GB" host qualifies.
BASELINE_RAM_PER_PROOF_GIB = 60.0

#: cuzk (RAM GiB, seconds per proof) on the reference GPU; Curio documentation.
CUZK_TIERS: tuple[tuple[float, float], ...] = (
    (128.0, 152.0),
    (256.0, 53.0),
    (384.0, 43.0),
    (512.0, 38.0),
)
CUZK_MIN_RAM_GIB = CUZK_TIERS[0][0]
#: The per-process baseline on cuzk's reference GPU (curio PR #1043: ~89 s).
_CUZK_REFERENCE_BASELINE_S = 89.0
#: Resident part of cuzk's memory (Peak RSS = 69 + 20 x partition_workers GiB),
#: shared by all GPUs of one host.
_CUZK_FIXED_GIB = 69.0


#: The oldest CUDA that builds for an architecture, by compute capability x 100
#: (newest first). Blackwell (sm_100, sm_120: B200, RTX 50xx) came with CUDA
#: 12.8; Hopper (sm_90) and Ada (sm_89) with 11.8; Ampere's sm_86 with 11.1
#: and sm_80 with 11.0 (NVIDIA's CUDA Toolkit release notes, "New Features" of
#: each release; checked 2026-12-06). An offer whose driver supports less
#: (``cuda_max_good``) cannot run a prover built for its GPU.
CUDA_BY_COMPUTE_CAP: tuple[tuple[int, float], ...] = (
    (1000, 12.8),
    (890, 11.8),
    (860, 11.1),
    (800, 11.0),
)


def min_cuda(gpu_name: str, compute_cap: int | None = None) -> float:
    """The oldest CUDA a `gpu_name` card runs on (0.0: no figure), from its
    `compute_cap` (x 100, as vast.ai lists it), else from `GPU_PROVING`."""
    cap = compute_cap if compute_cap else GPU_PROVING.get(gpu_name, _UNKNOWN_GPU).compute_cap
    if gpu_name not in GPU_PROVING and not compute_cap:
        return 0.0
    for lowest, cuda in CUDA_BY_COMPUTE_CAP:
        if cap >= lowest:
            return cuda
    return 0.0


def _gpu(gpu_name: str) -> GpuProving:
    return GPU_PROVING.get(gpu_name, _UNKNOWN_GPU)


def baseline_seconds(gpu_name: str) -> float:
    """Seconds per proof of one GPU with the baseline engine (``inf`` if it cannot prove)."""
    gpu = _gpu(gpu_name)
    if gpu.vram_mb < MIN_GPU_RAM_MB or gpu.compute_cap < MIN_COMPUTE_CAP:
        return math.inf
    return _SRS_LOAD_S + _SYNTHESIS_S + _GPU_REFERENCE_S / gpu.speed


def _cuzk_tier_seconds(ram_gib: float) -> float:
    """Seconds per proof on the reference GPU for a cuzk host with `ram_gib`."""
    tiers = CUZK_TIERS
    if ram_gib >= tiers[-1][0]:
        return tiers[-1][1]
    for (ram_lo, s_lo), (ram_hi, s_hi) in itertools.pairwise(tiers):
        if ram_lo <= ram_gib < ram_hi:
            return s_lo + (s_hi - s_lo) * (ram_gib - ram_lo) / (ram_hi - ram_lo)
    return math.inf


def _baseline_concurrency(num_gpus: int, cpu_ram_mb: float) -> int:
    return min(max(1, num_gpus), math.floor(cpu_ram_mb / 1024.0 / BASELINE_RAM_PER_PROOF_GIB))


def _gpu_bound(gpu_name: str, num_gpus: int, cpu_ram_mb: float) -> tuple[float, int, str]:
    """(proofs/h, proofs in flight, engine) of the better engine, ignoring the CPU."""
    gpus = max(1, num_gpus)
    base_s = baseline_seconds(gpu_name)
    if math.isinf(base_s):
        return 0.0, 0, ""
    ram_gib = cpu_ram_mb / 1024.0
    concurrent = _baseline_concurrency(gpus, cpu_ram_mb)
    baseline = concurrent * 3600.0 / base_s
    # cuzk: one resident SRS, the rest of the RAM split into partition workers
    # per GPU; compare each GPU's share to the single-GPU tiers.
    per_gpu_equivalent = _CUZK_FIXED_GIB + (ram_gib - _CUZK_FIXED_GIB) / gpus
    cuzk = 0.0
    if per_gpu_equivalent >= CUZK_MIN_RAM_GIB:
        ratio = _cuzk_tier_seconds(per_gpu_equivalent) / _CUZK_REFERENCE_BASELINE_S
        cuzk = gpus * 3600.0 / (base_s * ratio)
    if cuzk > baseline:
        return cuzk, gpus, "cuzk"
    if baseline > 0:
        return baseline, concurrent, "supraseal"
    return 0.0, 0, ""


def cpu_bound_proofs_per_hour(cpu_cores: float) -> float:
    """Most proofs per hour `cpu_cores` cores can synthesize."""
    return max(0.0, cpu_cores) * 3600.0 / SYNTHESIS_CORE_SECONDS


def proofs_per_hour(
    gpu_name: str, num_gpus: int, cpu_ram_mb: float, cpu_cores: float | None = None
) -> float:
    """Steady-state 32 GiB PoRep C2 proofs per hour of a whole machine.

    `cpu_cores` is what the rental gets (vast.ai's ``cpu_cores_effective``);
    None means unknown, and then the CPU bound is not applied.
    """
    rate, _, _ = _gpu_bound(gpu_name, num_gpus, cpu_ram_mb)
    if cpu_cores is not None:
        rate = min(rate, cpu_bound_proofs_per_hour(cpu_cores))
    return rate


def concurrent_proofs(gpu_name: str, num_gpus: int, cpu_ram_mb: float) -> int:
    """Proofs a proving machine has in flight at once (0 if it cannot prove)."""
    return _gpu_bound(gpu_name, num_gpus, cpu_ram_mb)[1]


def engine(gpu_name: str, num_gpus: int, cpu_ram_mb: float) -> str:
    """The engine that proves more here: ``cuzk``, ``supraseal`` or "" (none can)."""
    return _gpu_bound(gpu_name, num_gpus, cpu_ram_mb)[2]


def seconds_per_proof(
    gpu_name: str, num_gpus: int, cpu_ram_mb: float, cpu_cores: float | None = None
) -> float:
    """Wall seconds between two finished proofs of one GPU (``inf`` if it cannot prove)."""
    rate = proofs_per_hour(gpu_name, num_gpus, cpu_ram_mb, cpu_cores)
    return 3600.0 * max(1, num_gpus) / rate if rate > 0 else math.inf


def record_proofs_per_hour(record: Mapping[str, Any]) -> float:
    """`proofs_per_hour` of an offer or instance as vast.ai returns it (a JSON row).

    Reads ``gpu_name``, ``num_gpus``, ``cpu_ram`` (the host's MB) with
    ``gpu_frac`` (the rental's share of it, `slice_ram_mb`) and
    ``cpu_cores_effective`` (falling back to ``cpu_cores``); missing values
    count as nothing known.
    """
    cores = record.get("cpu_cores_effective")
    if cores is None:
        cores = record.get("cpu_cores")
    return proofs_per_hour(
        str(record.get("gpu_name") or ""),
        int(record.get("num_gpus") or 1),
        slice_ram_mb(_finite(record.get("cpu_ram")), _finite(record.get("gpu_frac"))),
        float(cores) if cores is not None else None,
    )


def _finite(value: Any) -> float | None:
    """A row's number, or None when it is no finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
