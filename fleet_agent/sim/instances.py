"""One rented machine and its lifecycle, decided when it is rented.

The whole future of an instance (how long it provisions and loads, whether it
runs, gets stuck or fails, when it dies) is drawn once, at rent time, from an
RNG seeded by the simulator seed and the instance id. Its state at any moment
is then a pure function of the clock, so the simulation is reproducible no
matter how often or how coarsely it is observed.

Statuses follow the service: ``actual_status`` is None while provisioning, then
``loading`` while the image is pulled, then ``running``; ``exited``,
``offline`` and ``unknown`` are terminal here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Literal

from fleet_agent.capacity import proofs_per_hour

from .catalogue import offer_pricing

__all__ = ["KILL_STATUSES", "Fate", "SimInstance", "draw_fate"]

KILL_STATUSES = frozenset({"exited", "offline", "unknown"})

Outcome = Literal["run", "stuck", "boot_fail"]

# Size of a proving image (CUDA runtime + prover), for the pull time.
_IMAGE_GB = 8.0

_BOOT_FAILURES = (
    (
        "exited",
        "Error response from daemon: failed to create task for container: "
        'could not select device driver "" with capabilities: [[gpu]]',
    ),
    ("exited", "Error: no space left on device while extracting image layers"),
    ("offline", "host machine went offline during container start"),
)
_DEATHS = (
    ("exited", "container exited with code 137 (OOM killed)"),
    ("exited", "container exited with code 1"),
    ("offline", "host machine is offline"),
    ("unknown", "no recent heartbeat from host"),
)


@dataclass(frozen=True, slots=True)
class Fate:
    """The future of one instance, relative to its creation time."""

    provision_s: float
    loading_s: float
    outcome: Outcome
    fail_status: str
    fail_msg: str
    die_after_s: float | None  # after reaching running; None = lives on
    death_status: str
    death_msg: str
    rate_jitter: float


def draw_fate(
    rng: random.Random,
    *,
    inet_down: float,
    stuck: bool,
    boot_fail: bool,
    die_after_s: float | None,
) -> Fate:
    """Draw timings and failure details; the caller has decided the failures."""
    provision_s = rng.uniform(5.0, 40.0)
    loading_s = 15.0 + _IMAGE_GB * 8000.0 / max(inet_down, 10.0) + rng.uniform(0.0, 60.0)
    fail_status, fail_msg = rng.choice(_BOOT_FAILURES)
    death_status, death_msg = rng.choice(_DEATHS)
    outcome: Outcome = "stuck" if stuck else "boot_fail" if boot_fail else "run"
    return Fate(
        provision_s=provision_s,
        loading_s=loading_s,
        outcome=outcome,
        fail_status=fail_status,
        fail_msg=fail_msg,
        die_after_s=die_after_s,
        death_status=death_status,
        death_msg=death_msg,
        rate_jitter=rng.uniform(0.93, 1.04),
    )


@dataclass(slots=True)
class SimInstance:
    """A rented machine: the offer it came from, the request, and its fate."""

    id: int
    offer: dict[str, Any]
    created_at: float
    fate: Fate
    image: str
    disk: float
    label: str | None
    onstart: str | None
    env: dict[str, str]
    runtype: str | None
    bid_price: float | None
    ssh_port: int
    killed_at: float | None = None
    killed_status: str = "exited"
    killed_msg: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------ timeline

    @property
    def running_at(self) -> float | None:
        """When it reaches running, if it ever does (ignoring kills)."""
        if self.fate.outcome != "run":
            return None
        return self.created_at + self.fate.provision_s + self.fate.loading_s

    def _natural_end(self) -> tuple[float, str, str] | None:
        f = self.fate
        if f.outcome == "boot_fail":
            return self.created_at + f.provision_s + f.loading_s, f.fail_status, f.fail_msg
        running_at = self.running_at
        if running_at is not None and f.die_after_s is not None:
            return running_at + f.die_after_s, f.death_status, f.death_msg
        return None

    def end(self) -> tuple[float, str, str] | None:
        """When and how it died: the first of its natural end and a kill."""
        natural = self._natural_end()
        if self.killed_at is not None and (natural is None or self.killed_at < natural[0]):
            return self.killed_at, self.killed_status, self.killed_msg
        return natural

    def status_at(self, now: float) -> tuple[str | None, str | None]:
        """``(actual_status, status_msg)`` at time `now`."""
        end = self.end()
        if end is not None and now >= end[0]:
            return end[1], end[2]
        age = now - self.created_at
        if age < self.fate.provision_s:
            return None, None
        running_at = self.running_at
        if running_at is None or now < running_at:
            return "loading", f"Pulling image {self.image}: downloading layers"
        return "running", f"success, running {self.image}/{self.runtype or 'ssh'}"

    def running_seconds(self, now: float) -> float:
        """Seconds spent running up to `now`."""
        running_at = self.running_at
        if running_at is None or now <= running_at:
            return 0.0
        end = self.end()
        stop = min(now, end[0]) if end is not None else now
        return max(0.0, stop - running_at)

    def kill(self, now: float, status: str, msg: str) -> None:
        """Make it die now (no effect if it is already dead)."""
        end = self.end()
        if end is not None and end[0] <= now:
            return
        self.killed_at, self.killed_status, self.killed_msg = now, status, msg

    # --------------------------------------------------------------- view

    def proof_rate(self) -> float:
        """Proofs/hour this machine sustains while running."""
        o = self.offer
        return proofs_per_hour(o["gpu_name"], o["num_gpus"], o["cpu_ram"]) * self.fate.rate_jitter

    def view(self, now: float) -> dict[str, Any]:
        """The instance as ``/api/v1/instances/`` and ``/api/v0/instances/{id}/`` show it."""
        o = self.offer
        status, msg = self.status_at(now)
        running = status == "running"
        run_s = self.running_seconds(now)
        pricing = offer_pricing(o, allocated_storage_gb=self.disk, bid=self.bid_price is not None)
        dph_total = pricing["dph_total"]
        if self.bid_price is not None:
            dph_total = round(self.bid_price + pricing["storage_total_cost"], 6)
        rate = self.proof_rate() if running else 0.0
        row: dict[str, Any] = {
            "id": self.id,
            "actual_status": status,
            "intended_status": "running",
            "cur_state": "running",
            "next_state": "running",
            "status_msg": msg,
            "label": self.label,
            "image_uuid": self.image,
            "image_runtype": self.runtype,
            "image_args": [],
            "extra_env": [[k, v] for k, v in self.env.items()],
            "onstart": self.onstart,
            "template_id": None,
            "template_hash_id": None,
            "jupyter_token": f"{self.id:064x}"[-64:],
            "machine_id": o["machine_id"],
            "host_id": o["host_id"],
            "bundle_id": o["bundle_id"],
            "public_ipaddr": o["public_ipaddr"],
            "local_ipaddrs": "172.17.0.2",
            "ssh_host": f"ssh{self.id % 9 + 1}.sim.vast.invalid",
            "ssh_idx": str(self.id % 9 + 1),
            "ssh_port": self.ssh_port,
            "machine_dir_ssh_port": self.ssh_port + 1,
            "direct_port_start": -1,
            "direct_port_end": -1,
            "ports": {},
            "start_date": self.created_at,
            "end_date": o["end_date"],
            "uptime_mins": round(run_s / 60.0, 2) if running else None,
            "is_bid": self.bid_price is not None,
            "min_bid": o["min_bid"],
            "dph_base": self.bid_price if self.bid_price is not None else o["dph_base"],
            "dph_total": dph_total,
            "storage_cost": o["storage_cost"],
            "storage_total_cost": pricing["storage_total_cost"],
            "inet_up_cost": o["inet_up_cost"],
            "inet_down_cost": o["inet_down_cost"],
            "disk_space": self.disk,
            "disk_usage": round(min(self.disk, 12.0), 2),
            "disk_util": round(min(1.0, 12.0 / self.disk), 4) if self.disk else 0.0,
            "gpu_util": round(90.0 + (self.id % 9), 1) if running and rate > 0 else 0.0,
            "cpu_util": 0.85 if running and rate > 0 else 0.0,
            "mem_usage": None,
            "mem_limit": round(o["cpu_ram"] / 1024.0, 3),
            "vmem_usage": None,
            "gpu_temp": 71.0 if running else None,
            "time_remaining": "",
            # Simulator extras: proving throughput from the capacity model.
            "proofs_per_hour": round(rate, 3),
            "proofs_completed": int(self.proof_rate() * run_s / 3600.0),
        }
        for key in (
            "gpu_name",
            "gpu_arch",
            "num_gpus",
            "gpu_ram",
            "gpu_frac",
            "gpu_mem_bw",
            "gpu_max_power",
            "gpu_max_temp",
            "gpu_display_active",
            "gpu_lanes",
            "compute_cap",
            "total_flops",
            "dlperf",
            "bw_nvlink",
            "cuda_max_good",
            "driver_version",
            "cpu_arch",
            "cpu_name",
            "cpu_ghz",
            "cpu_cores",
            "cpu_cores_effective",
            "cpu_ram",
            "has_avx",
            "mobo_name",
            "pci_gen",
            "pcie_bw",
            "disk_bw",
            "disk_name",
            "inet_down",
            "inet_up",
            "direct_port_count",
            "static_ip",
            "geolocation",
            "geolocode",
            "reliability2",
            "verification",
            "hosting_type",
            "vms_enabled",
            "os_version",
            "ubuntu_version",
            "host_id",
        ):
            row.setdefault(key, o.get(key))
        row["gpu_totalram"] = o["gpu_total_ram"]
        row.update(self.extra)
        return row
