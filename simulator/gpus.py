"""The GPU models the simulated market lists, with their share and price.

Names are spelled as vast.ai spells ``gpu_name``. Memory and compute capability
come from the capacity model's table (`fleet_agent.fleet.capacity.GPU_PROVING`), so
the market and the proving model never disagree about a card. Shares and
median prices are our estimate of vast.ai's public listings: consumer cards
dominate, most of them too small or too slow to prove, and the cards a prover
wants (3090/4090/5090, A100, H100) are a minority.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fleet_agent.fleet.capacity import GPU_PROVING

__all__ = ["GPU_SPECS", "GpuSpec", "HostKind"]

#: Which RAM, GPU-count and CPU profile a host of this card usually has.
HostKind = Literal["consumer", "workstation", "datacenter"]


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model as the market lists it."""

    name: str
    median_price: float  # $/hour for one GPU, the market median (on-demand)
    weight: float  # share of the offers (relative)
    tflops: float  # FP32, per GPU
    dlperf: float  # vast's DL-perf score, per GPU
    mem_bw: float  # GB/s
    max_power: float  # W
    kind: HostKind

    @property
    def gpu_ram_mb(self) -> int:
        """Memory of one card in MB (``gpu_ram``)."""
        return GPU_PROVING[self.name].vram_mb

    @property
    def compute_cap(self) -> int:
        """CUDA compute capability x 100 (``compute_cap``)."""
        return GPU_PROVING[self.name].compute_cap


def _g(
    name: str,
    price: float,
    weight: float,
    tflops: float,
    dlperf: float,
    mem_bw: float,
    power: float,
    kind: HostKind = "consumer",
) -> GpuSpec:
    return GpuSpec(name, price, weight, tflops, dlperf, mem_bw, power, kind)


GPU_SPECS: tuple[GpuSpec, ...] = (
    _g("GTX 1080 Ti", 0.07, 1.5, 11.3, 9.0, 484.0, 250.0),
    _g("RTX 2080 Ti", 0.09, 2.0, 13.4, 12.0, 616.0, 250.0),
    _g("RTX 3060", 0.06, 7.0, 12.7, 8.5, 360.0, 170.0),
    _g("RTX 3060 Ti", 0.07, 3.0, 16.2, 10.0, 448.0, 200.0),
    _g("RTX 3070", 0.08, 5.0, 20.3, 12.0, 448.0, 220.0),
    _g("RTX 3080", 0.11, 5.0, 29.8, 17.0, 760.0, 320.0),
    _g("RTX 3080 Ti", 0.13, 2.5, 34.1, 19.0, 912.0, 350.0),
    _g("RTX 3090", 0.22, 11.0, 35.6, 22.0, 936.0, 350.0),
    _g("RTX 3090 Ti", 0.25, 1.0, 40.0, 24.0, 1008.0, 450.0),
    _g("RTX 4060 Ti", 0.10, 3.5, 22.1, 13.0, 288.0, 165.0),
    _g("RTX 4070", 0.12, 3.5, 29.1, 17.0, 504.0, 200.0),
    _g("RTX 4070 Ti", 0.14, 2.5, 40.1, 22.0, 504.0, 285.0),
    _g("RTX 4080", 0.20, 2.5, 48.7, 28.0, 717.0, 320.0),
    _g("RTX 4080S", 0.22, 2.0, 52.2, 30.0, 736.0, 320.0),
    _g("RTX 4090", 0.38, 14.0, 82.6, 40.0, 1008.0, 450.0),
    _g("RTX 5060 Ti", 0.12, 1.5, 23.7, 14.0, 448.0, 180.0),
    _g("RTX 5070", 0.14, 1.5, 30.9, 18.0, 672.0, 250.0),
    _g("RTX 5070 Ti", 0.18, 2.0, 43.9, 25.0, 896.0, 300.0),
    _g("RTX 5080", 0.25, 2.0, 56.3, 32.0, 960.0, 360.0),
    _g("RTX 5090", 0.55, 6.0, 104.8, 55.0, 1792.0, 575.0),
    _g("RTX A4000", 0.12, 3.0, 19.2, 11.0, 448.0, 140.0, "workstation"),
    _g("RTX A5000", 0.18, 3.0, 27.8, 16.0, 768.0, 230.0, "workstation"),
    _g("RTX A6000", 0.40, 3.0, 38.7, 24.0, 768.0, 300.0, "workstation"),
    _g("RTX 6000Ada", 0.75, 2.0, 91.1, 45.0, 960.0, 300.0, "workstation"),
    _g("Q RTX 8000", 0.28, 0.8, 16.3, 11.0, 672.0, 260.0, "workstation"),
    _g("Tesla T4", 0.09, 0.8, 8.1, 5.0, 320.0, 70.0, "datacenter"),
    _g("Tesla V100", 0.16, 2.0, 15.7, 14.0, 900.0, 300.0, "datacenter"),
    _g("A10", 0.20, 0.6, 31.2, 16.0, 600.0, 150.0, "datacenter"),
    _g("A40", 0.38, 1.2, 37.4, 22.0, 696.0, 300.0, "datacenter"),
    _g("L4", 0.26, 0.8, 30.3, 14.0, 300.0, 72.0, "datacenter"),
    _g("L40S", 0.72, 1.5, 91.6, 48.0, 864.0, 350.0, "datacenter"),
    _g("A100 PCIE", 0.70, 1.5, 19.5, 40.0, 1555.0, 250.0, "datacenter"),
    _g("A100 SXM4", 0.85, 3.0, 19.5, 45.0, 2039.0, 400.0, "datacenter"),
    _g("H100 PCIE", 1.60, 1.5, 51.2, 80.0, 2000.0, 350.0, "datacenter"),
    _g("H100 SXM", 1.95, 4.5, 67.0, 95.0, 3350.0, 700.0, "datacenter"),
    _g("H100 NVL", 2.00, 1.0, 60.0, 90.0, 3900.0, 400.0, "datacenter"),
    _g("H200", 2.40, 1.5, 67.0, 100.0, 4800.0, 700.0, "datacenter"),
)
