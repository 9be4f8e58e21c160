"""The simulated market's offers: hosts, RAM, CPUs, prices, as vast.ai lists them.

`make_offer` draws one offer from its own RNG, seeded by the simulator seed
and the offer id, so an offer is a pure function of ``(seed, offer_id,
machine_id, listed_at)``: the state file stores those four numbers and
`make_offer` rebuilds the rest. It returns the shape ``POST /api/v0/bundles/``
returns: every field the vastai CLI can filter on or display, in the service's
units (RAM in MB, prices in $/hour, bandwidth in Mb/s, ``duration`` in seconds).

Most offers are hosts a prover does not want: small or old GPUs, little RAM
per GPU, few cores, low reliability, unverified or external hosts. High-RAM
consumer hosts are rare and cost more (the RAM premium). Figures and their
sources: docs/SIMULATOR.md, "Market model".
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from .gpus import GPU_SPECS, GpuSpec, HostKind

__all__ = [
    "GPU_SPECS",
    "GpuSpec",
    "gpu_names",
    "gpu_types",
    "make_offer",
    "offer_pricing",
]

_T = TypeVar("_T")


class _Weighted(Generic[_T]):
    """A weighted choice with its cumulative weights computed once (fast draws)."""

    def __init__(self, pairs: Sequence[tuple[_T, float]]) -> None:
        self.values = [v for v, _ in pairs]
        self.cum = list(itertools.accumulate(w for _, w in pairs))

    def draw(self, rng: random.Random) -> _T:
        return self.values[bisect.bisect(self.cum, rng.random() * self.cum[-1])]


_GPUS = _Weighted([(s, s.weight) for s in GPU_SPECS])

# GPUs in the host, host RAM per GPU (nominal GiB) and host CPU cores, per kind
# of host. Consumer rigs: mostly one or two cards with 16-64 GiB each; the
# 4-8-card rigs often on a desktop CPU. Datacenter hosts: 8 cards, 128-256 GiB
# each, many cores.
_HOST_GPUS: dict[HostKind, _Weighted[int]] = {
    "consumer": _Weighted([(1, 0.50), (2, 0.17), (4, 0.15), (8, 0.18)]),
    "workstation": _Weighted([(1, 0.30), (2, 0.25), (4, 0.30), (8, 0.15)]),
    "datacenter": _Weighted([(1, 0.08), (2, 0.10), (4, 0.20), (8, 0.62)]),
}
_RAM_PER_GPU: dict[HostKind, _Weighted[int]] = {
    "consumer": _Weighted(
        [(8, 0.08), (16, 0.22), (32, 0.33), (64, 0.22), (128, 0.10), (256, 0.04), (512, 0.01)]
    ),
    "workstation": _Weighted([(32, 0.15), (64, 0.35), (128, 0.35), (256, 0.12), (512, 0.03)]),
    "datacenter": _Weighted([(32, 0.05), (64, 0.15), (128, 0.35), (256, 0.35), (512, 0.10)]),
}
_HOST_CORES: dict[HostKind, _Weighted[int]] = {
    "consumer": _Weighted(
        [
            (4, 0.08),
            (6, 0.07),
            (8, 0.15),
            (12, 0.15),
            (16, 0.25),
            (24, 0.12),
            (32, 0.13),
            (64, 0.05),
        ]
    ),
    "workstation": _Weighted([(16, 0.2), (24, 0.2), (32, 0.3), (64, 0.25), (128, 0.05)]),
    "datacenter": _Weighted(
        [(32, 0.1), (64, 0.3), (96, 0.2), (128, 0.25), (192, 0.1), (256, 0.05)]
    ),
}
_CPUS: dict[HostKind, tuple[tuple[str, float], ...]] = {
    "consumer": (
        ("Intel Celeron G4900", 3.1),
        ("Intel Core i5-10400F", 2.9),
        ("AMD Ryzen 5 5600X 6-Core Processor", 3.7),
        ("AMD Ryzen 9 5950X 16-Core Processor", 3.4),
        ("AMD Ryzen 9 7950X 16-Core Processor", 4.5),
        ("Intel Core i9-13900K", 3.0),
        ("AMD Ryzen Threadripper 3970X 32-Core Processor", 3.7),
    ),
    "workstation": (
        ("AMD Ryzen Threadripper PRO 5975WX", 3.6),
        ("AMD Ryzen Threadripper PRO 7985WX", 3.2),
        ("Intel Xeon W-3375", 2.5),
        ("AMD EPYC 7543 32-Core Processor", 2.8),
    ),
    "datacenter": (
        ("AMD EPYC 7742 64-Core Processor", 2.25),
        ("AMD EPYC 9554 64-Core Processor", 3.1),
        ("Intel Xeon Platinum 8480+", 2.0),
        ("Intel Xeon Gold 6338", 2.0),
    ),
}
_MOBOS = ("ROMED8-2T", "H12SSL-i", "X13SWA-TF", "PRO WS WRX80E-SAGE", "B650M", "B250 MINING EXPERT")
# (driver, highest CUDA it runs): old drivers are common on hobby hosts.
_DRIVERS = _Weighted(
    [
        (("470.256.02", 11.4), 0.04),
        (("525.147.05", 12.0), 0.08),
        (("535.183.01", 12.2), 0.18),
        (("550.120", 12.4), 0.25),
        (("560.35.03", 12.6), 0.20),
        (("570.86.15", 12.8), 0.25),
    ]
)
# (geolocation as the service writes it, geolocode, weight)
_PLACES = _Weighted(
    [
        (("Texas, US", 840), 0.12),
        (("California, US", 840), 0.09),
        (("Virginia, US", 840), 0.05),
        (("Quebec, CA", 124), 0.06),
        (("Sweden, SE", 752), 0.05),
        (("Norway, NO", 578), 0.03),
        (("Germany, DE", 276), 0.07),
        (("Netherlands, NL", 528), 0.04),
        (("Poland, PL", 616), 0.04),
        (("Czechia, CZ", 203), 0.03),
        (("Taiwan, TW", 158), 0.07),
        (("Japan, JP", 392), 0.04),
        (("Vietnam, VN", 704), 0.06),
        (("China, CN", 156), 0.08),
        (("Hong Kong, HK", 344), 0.03),
        (("India, IN", 356), 0.03),
        (("Australia, AU", 36), 0.02),
        (("Brazil, BR", 76), 0.02),
        (("Ukraine, UA", 804), 0.03),
        (("Spain, ES", 724), 0.03),
    ]
)
# Documentation address blocks (RFC 5737), so no simulated IP is a real host.
_NETS = ("192.0.2", "198.51.100", "203.0.113")
#: Extra $/h per GPU for RAM, as a share of the GPU's price per doubling of
#: RAM per GPU over 32 GiB (consumer/workstation) or 128 GiB (datacenter).
_RAM_PREMIUM = {"consumer": 0.30, "workstation": 0.20, "datacenter": 0.08}
_RAM_BASE_GIB = {"consumer": 32.0, "workstation": 32.0, "datacenter": 128.0}


def gpu_names() -> list[str]:
    """Every GPU model the market lists (``/api/v0/gpu_names/unique/``)."""
    return [spec.name for spec in GPU_SPECS]


def gpu_types() -> list[dict[str, Any]]:
    """The GPU catalogue the CLI reads from ``/api/v0/gpu_types/``."""
    return [{"canonical_name": s.name, "gpu_ram_mb": s.gpu_ram_mb} for s in GPU_SPECS]


def offer_rng(seed: int, offer_id: int) -> random.Random:
    """The RNG one offer is drawn from."""
    return random.Random(f"{seed}/offer/{offer_id}")


def make_offer(seed: int, offer_id: int, machine_id: int, now: float) -> dict[str, Any]:
    """Draw the offer `offer_id` of the market `seed`, listed at time `now`."""
    rng = offer_rng(seed, offer_id)
    spec = _GPUS.draw(rng)
    kind = spec.kind
    datacenter = kind == "datacenter" and rng.random() < 0.8
    host_gpus = _HOST_GPUS[kind].draw(rng)
    # A host lists bundles of 1, 2, 4 ... of its cards; this offer is one of them.
    num_gpus = rng.choice([n for n in (1, 2, 4, 8) if n <= host_gpus])
    frac = num_gpus / host_gpus
    ram_per_gpu = _RAM_PER_GPU[kind].draw(rng)
    # Hosts report a little under their nominal RAM. A row lists the whole
    # host's (as vast.ai does); a rental gets its `gpu_frac` share of it.
    host_ram_mb = int(ram_per_gpu * host_gpus * 1024 * rng.uniform(0.96, 0.995))
    host_cores = max(_HOST_CORES[kind].draw(rng), 2)
    cores_effective = round(host_cores * frac, 1)
    cpu_name, cpu_ghz = rng.choice(_CPUS[kind])

    # Price: lognormal spread around the median, a premium for RAM per GPU,
    # a discount for unverified or flaky hosts.
    reliability = round(0.6 + 0.3999 * rng.betavariate(5.0, 1.0), 5)
    verified = rng.random() < (0.95 if datacenter else 0.6)
    external = rng.random() < (0.02 if datacenter else 0.12)
    spread = min(2.2, max(0.5, rng.lognormvariate(0.0, 0.25)))
    doublings = max(0.0, math.log2(ram_per_gpu / _RAM_BASE_GIB[kind]))
    ram_premium = 1.0 + _RAM_PREMIUM[kind] * doublings
    trust = (1.0 if verified else 0.9) * (0.85 + 0.15 * reliability)
    per_gpu = spec.median_price * spread * ram_premium * trust
    dph_base = round(per_gpu * num_gpus, 4)
    storage_cost = round(rng.uniform(0.05, 0.30), 3)  # $/GB/month
    min_bid = round(dph_base * rng.uniform(0.3, 0.6), 4)

    place, geocode = _PLACES.draw(rng)
    driver, cuda = _DRIVERS.draw(rng)
    inet_down = round(min(10000.0, max(10.0, rng.lognormvariate(math.log(500), 0.9))), 1)
    inet_up = round(inet_down * rng.uniform(0.2, 1.0), 1)
    disk_space = float(rng.choice((30, 50, 100, 250, 500, 1000, 2000)))
    duration_s = rng.uniform(1, 180) * 86400.0
    total_flops = round(spec.tflops * num_gpus, 1)
    dlperf = round(spec.dlperf * num_gpus * rng.uniform(0.85, 1.05), 2)
    rented = rng.random() < 0.03
    rentable = not rented and rng.random() < 0.97
    ip = f"{rng.choice(_NETS)}.{rng.randrange(1, 255)}"
    return {
        "id": offer_id,
        "ask_contract_id": offer_id,
        "bundle_id": offer_id * 10 + 1,
        "machine_id": machine_id,
        "host_id": 1000 + machine_id % 7919,
        "hosting_type": 1 if datacenter else 0,
        "datacenter": datacenter,
        "external": external,
        "rentable": rentable,
        "rented": rented,
        "verified": verified,
        "verification": "verified" if verified else "unverified",
        "is_bid": False,
        "gpu_name": spec.name,
        "gpu_arch": "nvidia",
        "num_gpus": num_gpus,
        "gpu_frac": round(frac, 4),
        "gpu_ram": spec.gpu_ram_mb,
        "gpu_total_ram": spec.gpu_ram_mb * num_gpus,
        "gpu_mem_bw": spec.mem_bw,
        "gpu_max_power": spec.max_power,
        "gpu_max_temp": 83.0,
        "gpu_display_active": kind == "consumer" and rng.random() < 0.2,
        "gpu_lanes": rng.choice((1, 4, 8, 16, 16, 16)) if kind == "consumer" else 16,
        "compute_cap": spec.compute_cap,
        "total_flops": total_flops,
        "dlperf": dlperf,
        "bw_nvlink": 0.0 if kind != "datacenter" else float(rng.choice((0, 300, 600))),
        "cuda_max_good": cuda,
        "driver_version": driver,
        "cpu_arch": "amd64",
        "cpu_name": cpu_name,
        "cpu_ghz": cpu_ghz,
        "cpu_cores": host_cores,
        "cpu_cores_effective": cores_effective,
        "cpu_ram": host_ram_mb,
        "has_avx": 1,
        "mobo_name": rng.choice(_MOBOS),
        "pci_gen": float(rng.choice((3, 4, 4, 5))),
        "pcie_bw": round(rng.uniform(1.5, 25.0), 1),
        "disk_space": disk_space,
        "disk_bw": round(rng.uniform(200, 6000), 1),
        "disk_name": rng.choice(("nvme", "nvme", "SSD", "HDD")),
        "inet_down": inet_down,
        "inet_up": inet_up,
        "inet_down_cost": round(rng.uniform(0.0, 0.01), 4),
        "inet_up_cost": round(rng.uniform(0.0, 0.01), 4),
        "direct_port_count": rng.choice((0, 0, 10, 50, 100, 500)),
        "static_ip": rng.random() < 0.4,
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
