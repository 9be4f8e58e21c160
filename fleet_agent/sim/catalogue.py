"""The simulated market's machines: GPU models, prices and offer records.

`make_offer` draws one offer from a seeded RNG and returns it in the shape
``POST /api/v0/bundles/`` returns: every field the vastai CLI can filter on or
display, in the service's units (RAM in MB, prices in $/hour, bandwidth in
Mb/s, ``duration`` in seconds). Prices, reliability and host RAM spread around
a per-GPU median so that choosing well matters.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "GPU_SPECS",
    "GpuSpec",
    "gpu_names",
    "gpu_types",
    "make_offer",
    "offer_pricing",
]


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model as the market lists it."""

    name: str
    gpu_ram_mb: int
    median_price: float  # $/hour for one GPU, the market median
    weight: float  # share of the offers
    tflops: float  # FP32, per GPU
    dlperf: float  # vast's DL-perf score, per GPU
    compute_cap: int
    mem_bw: float  # GB/s
    max_power: float  # W
    datacenter: bool  # usually listed by datacenters
    ram_per_gpu_gib: tuple[tuple[int, float], ...]  # (host RAM per GPU, weight)
    num_gpus: tuple[tuple[int, float], ...]  # (GPUs in the offer, weight)


_CONSUMER_RAM = ((32, 0.10), (64, 0.25), (128, 0.30), (256, 0.25), (512, 0.10))
_DATACENTER_RAM = ((64, 0.10), (128, 0.35), (256, 0.40), (512, 0.15))
_CONSUMER_GPUS = ((1, 0.60), (2, 0.20), (4, 0.12), (8, 0.08))
_DATACENTER_GPUS = ((1, 0.40), (2, 0.20), (4, 0.15), (8, 0.25))

GPU_SPECS: tuple[GpuSpec, ...] = (
    GpuSpec(
        name="RTX 3090",
        gpu_ram_mb=24576,
        median_price=0.25,
        weight=0.30,
        tflops=35.6,
        dlperf=22.0,
        compute_cap=860,
        mem_bw=936.0,
        max_power=350.0,
        datacenter=False,
        ram_per_gpu_gib=_CONSUMER_RAM,
        num_gpus=_CONSUMER_GPUS,
    ),
    GpuSpec(
        name="RTX 4090",
        gpu_ram_mb=24564,
        median_price=0.40,
        weight=0.30,
        tflops=82.6,
        dlperf=40.0,
        compute_cap=890,
        mem_bw=1008.0,
        max_power=450.0,
        datacenter=False,
        ram_per_gpu_gib=_CONSUMER_RAM,
        num_gpus=_CONSUMER_GPUS,
    ),
    GpuSpec(
        name="RTX 5090",
        gpu_ram_mb=32607,
        median_price=0.51,
        weight=0.15,
        tflops=104.8,
        dlperf=55.0,
        compute_cap=1200,
        mem_bw=1792.0,
        max_power=575.0,
        datacenter=False,
        ram_per_gpu_gib=_CONSUMER_RAM,
        num_gpus=_CONSUMER_GPUS,
    ),
    GpuSpec(
        name="A100 SXM4",
        gpu_ram_mb=81920,
        median_price=0.80,
        weight=0.12,
        tflops=19.5,
        dlperf=45.0,
        compute_cap=800,
        mem_bw=2039.0,
        max_power=400.0,
        datacenter=True,
        ram_per_gpu_gib=_DATACENTER_RAM,
        num_gpus=_DATACENTER_GPUS,
    ),
    GpuSpec(
        name="H100 SXM",
        gpu_ram_mb=81559,
        median_price=1.90,
        weight=0.13,
        tflops=67.0,
        dlperf=95.0,
        compute_cap=900,
        mem_bw=3350.0,
        max_power=700.0,
        datacenter=True,
        ram_per_gpu_gib=_DATACENTER_RAM,
        num_gpus=_DATACENTER_GPUS,
    ),
)

_T = TypeVar("_T")

# (geolocation as the service writes it, geolocode, weight)
_PLACES: tuple[tuple[str, int, float], ...] = (
    ("Texas, US", 840, 0.14),
    ("California, US", 840, 0.10),
    ("Virginia, US", 840, 0.06),
    ("Quebec, CA", 124, 0.07),
    ("Sweden, SE", 752, 0.06),
    ("Norway, NO", 578, 0.04),
    ("Germany, DE", 276, 0.08),
    ("Netherlands, NL", 528, 0.05),
    ("Poland, PL", 616, 0.04),
    ("Taiwan, TW", 158, 0.08),
    ("Japan, JP", 392, 0.05),
    ("Vietnam, VN", 704, 0.06),
    ("China, CN", 156, 0.08),
    ("Australia, AU", 36, 0.03),
    ("Brazil, BR", 76, 0.02),
)
_CPUS = (
    ("AMD EPYC 7742 64-Core Processor", 2.25),
    ("AMD EPYC 7543 32-Core Processor", 2.8),
    ("AMD Ryzen 9 7950X 16-Core Processor", 4.5),
    ("Intel Xeon Gold 6338", 2.0),
    ("AMD Ryzen Threadripper PRO 5975WX", 3.6),
)
_MOBOS = ("ROMED8-2T", "H12SSL-i", "X13SWA-TF", "PRO WS WRX80E-SAGE", "B650M")
_DRIVERS = (("550.120", 12.4), ("560.35.03", 12.6), ("570.86.15", 12.8))
# Documentation address blocks (RFC 5737), so no simulated IP is a real host.
_NETS = ("192.0.2", "198.51.100", "203.0.113")


def _pick(rng: random.Random, weighted: tuple[tuple[_T, float], ...]) -> _T:
    values = [v for v, _ in weighted]
    weights = [w for _, w in weighted]
    return rng.choices(values, weights=weights, k=1)[0]


def gpu_names() -> list[str]:
    """Every GPU model the market lists (``/api/v0/gpu_names/unique/``)."""
    return [spec.name for spec in GPU_SPECS]


def gpu_types() -> list[dict[str, Any]]:
    """The GPU catalogue the CLI reads from ``/api/v0/gpu_types/``."""
    return [{"canonical_name": s.name, "gpu_ram_mb": s.gpu_ram_mb} for s in GPU_SPECS]


def make_offer(rng: random.Random, offer_id: int, machine_id: int, now: float) -> dict[str, Any]:
    """Draw one offer listed at time `now`."""
    spec = rng.choices(GPU_SPECS, weights=[s.weight for s in GPU_SPECS], k=1)[0]
    num_gpus = _pick(rng, spec.num_gpus)
    ram_per_gpu = _pick(rng, spec.ram_per_gpu_gib)
    host_ram_gib = min(2048, ram_per_gpu * num_gpus)
    # Hosts report a little under their nominal RAM.
    cpu_ram_mb = int(host_ram_gib * 1024 * rng.uniform(0.96, 0.995))

    # Price: lognormal spread around the median, a premium for more RAM per GPU.
    spread = min(1.8, max(0.6, rng.lognormvariate(0.0, 0.18)))
    ram_premium = 1.0 + 0.06 * math.log2(ram_per_gpu / 64.0)
    per_gpu = spec.median_price * spread * ram_premium
    dph_base = round(per_gpu * num_gpus, 4)
    storage_cost = round(rng.uniform(0.08, 0.30), 3)  # $/GB/month

    # Reliability: mostly high, with a long tail of flaky hosts.
    reliability = round(0.80 + 0.1999 * rng.betavariate(6.0, 1.2), 5)
    datacenter = spec.datacenter and rng.random() < 0.8
    verified = rng.random() < (0.97 if datacenter else 0.85)
    place, geocode, _ = rng.choices(_PLACES, weights=[p[2] for p in _PLACES], k=1)[0]
    cpu_name, cpu_ghz = rng.choice(_CPUS)
    driver, cuda = rng.choice(_DRIVERS)
    host_gpus = max(num_gpus, rng.choice((1, 2, 4, 8)))
    cores = num_gpus * rng.choice((8, 12, 16, 24, 32))
    inet_down = round(min(10000.0, max(50.0, rng.lognormvariate(math.log(600), 0.7))), 1)
    inet_up = round(inet_down * rng.uniform(0.3, 1.0), 1)
    disk_space = float(rng.choice((100, 250, 500, 1000, 2000)))
    duration_s = rng.uniform(3, 180) * 86400.0
    total_flops = round(spec.tflops * num_gpus, 1)
    dlperf = round(spec.dlperf * num_gpus * rng.uniform(0.9, 1.05), 2)
    min_bid = round(dph_base * rng.uniform(0.35, 0.6), 4)
    ip = f"{rng.choice(_NETS)}.{rng.randrange(1, 255)}"
    return {
        "id": offer_id,
        "ask_contract_id": offer_id,
        "bundle_id": offer_id * 10 + 1,
        "machine_id": machine_id,
        "host_id": 1000 + machine_id % 7919,
        "hosting_type": 1 if datacenter else 0,
        "datacenter": datacenter,
        "external": False,
        "rentable": True,
        "rented": False,
        "verified": verified,
        "verification": "verified" if verified else "unverified",
        "is_bid": False,
        "gpu_name": spec.name,
        "gpu_arch": "nvidia",
        "num_gpus": num_gpus,
        "gpu_frac": round(num_gpus / host_gpus, 4),
        "gpu_ram": spec.gpu_ram_mb,
        "gpu_total_ram": spec.gpu_ram_mb * num_gpus,
        "gpu_mem_bw": spec.mem_bw,
        "gpu_max_power": spec.max_power,
        "gpu_max_temp": 83.0,
        "gpu_display_active": False,
        "gpu_lanes": 16,
        "compute_cap": spec.compute_cap,
        "total_flops": total_flops,
        "dlperf": dlperf,
        "bw_nvlink": 0.0,
        "cuda_max_good": cuda,
        "driver_version": driver,
        "cpu_arch": "amd64",
        "cpu_name": cpu_name,
        "cpu_ghz": cpu_ghz,
        "cpu_cores": cores,
        "cpu_cores_effective": float(cores),
        "cpu_ram": cpu_ram_mb,
        "has_avx": 1,
        "mobo_name": rng.choice(_MOBOS),
        "pci_gen": 4.0,
        "pcie_bw": round(rng.uniform(11.0, 25.0), 1),
        "disk_space": disk_space,
        "disk_bw": round(rng.uniform(800, 6000), 1),
        "disk_name": "nvme",
        "inet_down": inet_down,
        "inet_up": inet_up,
        "inet_down_cost": round(rng.uniform(0.0, 0.01), 4),
        "inet_up_cost": round(rng.uniform(0.0, 0.01), 4),
        "direct_port_count": rng.choice((0, 10, 50, 100, 500)),
        "static_ip": rng.random() < 0.5,
        "public_ipaddr": ip,
        "geolocation": place,
        "geolocode": geocode,
        "reliability": reliability,
        "reliability2": reliability,
        "reliability_mult": 1.0,
        "dph_base": dph_base,
        "min_bid": min_bid,
        "storage_cost": storage_cost,
        "credit_discount_max": 0.0,
        "start_date": now,
        "end_date": now + duration_s,
        "duration": duration_s,
        "ubuntu_version": "22.04",
        "os_version": "22.04",
        "vms_enabled": False,
        "cluster_id": None,
        "webpage": None,
        "logo": "/static/logos/vastai_small2.png",
    }


def offer_pricing(
    offer: dict[str, Any], *, allocated_storage_gb: float, bid: bool
) -> dict[str, Any]:
    """The price fields of `offer` for a search asking `allocated_storage_gb` of disk.

    ``dph_total`` includes that storage, as the service's does; a bid search
    prices at the minimum bid.
    """
    storage_dph = offer["storage_cost"] * allocated_storage_gb / (30.0 * 24.0)
    gpu_dph = offer["min_bid"] if bid else offer["dph_base"]
    total = round(gpu_dph + storage_dph, 6)
    return {
        "dph_total": total,
        "storage_total_cost": round(storage_dph, 6),
        "is_bid": bid,
        "discounted_dph_total": round(total * 0.85, 6),
        "dlperf_per_dphtotal": round(offer["dlperf"] / total, 3),
        "flops_per_dphtotal": round(offer["total_flops"] / total, 3),
        "score": round(offer["dlperf"] / total * offer["reliability2"], 3),
    }
