"""How many 32 GiB PoRep C2 proofs a rented machine completes per hour.

Shared by the simulator (what its machines prove) and the fleet code (what an
offer or a real vast.ai machine, which reports no throughput, is expected to prove).

The model (sources and reasoning in docs/SIMULATOR.md):

* Baseline engine, SupraSeal C2 with one process per proof: about 140 s per
  proof on an RTX 3090/4090 (SupraSeal's C2 README: "2-3 minutes depending on
  GPU"), so ~25 proofs/h. Each process holds its own copy of the ~47 GiB SRS,
  so a host runs at most one such proof per `BASELINE_RAM_PER_PROOF_GIB`.
* cuzk engine: one daemon keeps the SRS resident and pipelines partition
  synthesis; more host RAM means more partition workers and shorter seconds per
  proof. Curio's cuzk documentation gives, on its reference GPU,
  128 GiB -> 152 s, 256 GiB -> 53 s, 384 GiB -> 43 s, 512+ GiB -> 38 s,
  against ~89 s for the per-process baseline on the same GPU (curio PR #1043).
  We apply that ratio to each GPU's baseline, interpolating linearly in RAM.
* A machine uses whichever engine gives more proofs per hour.
"""

from __future__ import annotations

import itertools
import math

__all__ = [
    "BASELINE_RAM_PER_PROOF_GIB",
    "BASELINE_SECONDS",
    "CUZK_MIN_RAM_GIB",
    "CUZK_TIERS",
    "proofs_per_hour",
    "seconds_per_proof",
]

#: Seconds per 32 GiB PoRep C2 with the baseline engine, per GPU model. The
#: synthesis half of C2 runs on the CPU, so faster GPUs gain less than their
#: FLOPS suggest.
BASELINE_SECONDS: dict[str, float] = {
    "RTX 3090": 145.0,
    "RTX 4090": 135.0,
    "RTX 5090": 120.0,
    "A100 SXM4": 140.0,
    "H100 SXM": 115.0,
}
_UNKNOWN_GPU_SECONDS = 180.0

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
_CUZK_REFERENCE_BASELINE_S = 89.0
#: Resident part of cuzk's memory (Peak RSS = 69 + 20 x partition_workers GiB),
#: shared by all GPUs of one host.
_CUZK_FIXED_GIB = 69.0


def _cuzk_tier_seconds(ram_gib: float) -> float:
    """Seconds per proof on the reference GPU for a cuzk host with `ram_gib`."""
    tiers = CUZK_TIERS
    if ram_gib >= tiers[-1][0]:
        return tiers[-1][1]
    for (ram_lo, s_lo), (ram_hi, s_hi) in itertools.pairwise(tiers):
        if ram_lo <= ram_gib < ram_hi:
            return s_lo + (s_hi - s_lo) * (ram_gib - ram_lo) / (ram_hi - ram_lo)
    return math.inf


def seconds_per_proof(gpu_name: str, num_gpus: int, cpu_ram_mb: float) -> float:
    """Wall seconds between two finished proofs of one GPU (``inf`` if it cannot prove)."""
    rate = proofs_per_hour(gpu_name, num_gpus, cpu_ram_mb)
    return 3600.0 * max(1, num_gpus) / rate if rate > 0 else math.inf


def proofs_per_hour(gpu_name: str, num_gpus: int, cpu_ram_mb: float) -> float:
    """Steady-state 32 GiB PoRep C2 proofs per hour of a whole machine."""
    gpus = max(1, num_gpus)
    ram_gib = cpu_ram_mb / 1024.0
    base_s = BASELINE_SECONDS.get(gpu_name, _UNKNOWN_GPU_SECONDS)

    # Baseline: each concurrent proof needs its own SRS copy in host RAM.
    concurrent = min(gpus, math.floor(ram_gib / BASELINE_RAM_PER_PROOF_GIB))
    baseline = concurrent * 3600.0 / base_s

    # cuzk: one resident SRS, the rest of the RAM split into partition workers
    # per GPU; compare each GPU's share to the single-GPU tiers.
    per_gpu_equivalent = _CUZK_FIXED_GIB + (ram_gib - _CUZK_FIXED_GIB) / gpus
    cuzk = 0.0
    if per_gpu_equivalent >= CUZK_MIN_RAM_GIB:
        ratio = _cuzk_tier_seconds(per_gpu_equivalent) / _CUZK_REFERENCE_BASELINE_S
        cuzk = gpus * 3600.0 / (base_s * ratio)
    return max(baseline, cuzk)
