"""One rented instance: the offer it came from, the request, its machine, its row.

The lifecycle lives in `simulator.lifecycle.Machine`; this module adds
what the API shows: the instance row of ``/api/v1/instances/`` and
``/api/v0/instances/{id}/`` (state fields, prices, host fields, port
mappings), and the truth the control API reports (proofs, prover phase).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .billing import BYTES_PER_BILLED_KB, prices
from .cuzk_machine import cuzk_state, front_port, proof_seconds, true_proofs_per_hour
from .faults import Faults
from .lifecycle import Machine
from .prover import (
    PROVER_STATUS_PORT,
    offer_proof_rate,
    prover_blocker,
    rental_ram_mb,
    status_body,
)

__all__ = ["KILL_STATUSES", "InstanceEnv", "SimInstance", "container_ports"]

KILL_STATUSES = frozenset({"exited", "offline", "unknown"})

# Host fields an instance row repeats from its offer.
_HOST_FIELDS = (
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
)
_PORT_OPTION = re.compile(r"^-p\s+(?:\d+:)?(\d+)(?:/(tcp|udp))?$")


def container_ports(runtype: str | None, env: dict[str, str]) -> list[str]:
    """Container ports vast.ai maps: SSH/Jupyter's, the image's EXPOSE, and ``-p`` options.

    Returned as Docker names (``"22/tcp"``), in a stable order. A create in
    router mode runs the router image, which EXPOSEs its front's port
    (prover_image/Dockerfile; simulator/cuzk_machine.py ``front_port``).
    """
    wanted: list[str] = []
    kind = runtype or "ssh"
    if "ssh" in kind or "jupyter" in kind:
        wanted.append("22/tcp")
    if "jupyter" in kind:
        wanted.append("8080/tcp")
    wanted.append(f"{PROVER_STATUS_PORT}/tcp")  # the prover image EXPOSEs its default
    front = front_port(env)
    if front is not None:
        wanted.append(f"{front}/tcp")
    for key in env:
        m = _PORT_OPTION.match(key.strip())
        if m:
            wanted.append(f"{m[1]}/{m[2] or 'tcp'}")
    return list(dict.fromkeys(wanted))


class InstanceEnv:
    """What an instance's machine reads from the market (see `MachineEnv`)."""

    def __init__(
        self,
        offer: dict[str, Any],
        faults: Callable[[], Faults],
        *,
        jitter: float,
        bid_price: float | None,
    ) -> None:
        self._offer = offer
        self._faults = faults
        self._rate = offer_proof_rate(offer) * jitter
        self._blocker = prover_blocker(offer)
        self._bid_price = bid_price

    @property
    def faults(self) -> Faults:
        return self._faults()

    def proof_rate(self) -> float:
        return self._rate if self._blocker is None else 0.0

    def prover_blocker(self) -> str | None:
        return self._blocker

    def death_hazard_per_hour(self) -> float:
        faults = self.faults
        flaky = (1.0 - float(self._offer["reliability2"])) if faults.reliability_failures else 0.0
        # A 0.97-reliable host loses about one rental in 70 days of its own.
        return faults.death_rate_per_hour + 0.05 * flaky

    def outbid_hazard_per_hour(self) -> float:
        if self._bid_price is None:
            return 0.0
        # At the minimum bid the full hazard; bidding up to the on-demand price
        # cuts it to a tenth (on-demand rentals still take the GPUs).
        low, high = float(self._offer["min_bid"]), float(self._offer["dph_base"])
        share = (high - self._bid_price) / (high - low) if high > low else 0.0
        return self.faults.outbid_rate_per_hour * max(0.1, min(1.0, share))


@dataclass(slots=True)
class SimInstance:
    """A rented machine: the offer it came from, the request, and its machine."""

    id: int
    offer: dict[str, Any]
    machine: Machine
    label: str | None
    onstart: str | None
    env: dict[str, str]
    bid_price: float | None
    ssh_port: int
    #: Host ports by container port (``"9821/tcp": 41234``); empty when the
    #: host has no direct ports for them.
    host_ports: dict[str, int] = field(default_factory=dict)
    public_ip: str = ""
    #: Fields over the row's, and over the prover's status: what a hostile
    #: host makes them say (`MarketControls.hostile_host`).
    extra: dict[str, Any] = field(default_factory=dict)
    status_extra: dict[str, Any] = field(default_factory=dict)
    #: How a hostile host answers ``POST /drain`` ("" as the sidecar does).
    drain_extra: str = ""
    #: Router mode (simulator/cuzk_machine.py): why the image would not start
    #: (None: it starts), its cuzk's behaviour (a hostile host's, and a
    #: revision that changes with it), and the truth of what its cuzk proved:
    #: answers COMPLETED by kind (cuzk's Display names), and how many of
    #: them would not verify.
    cuzk_refusal: str | None = None
    cuzk_behaviour: dict[str, Any] = field(default_factory=lambda: {"mode": "honest"})
    cuzk_rev: int = 0
    cuzk_proofs: dict[str, int] = field(default_factory=dict)
    cuzk_bad: int = 0

    # ---------------------------------------------------------------- state

    def to_json(self) -> dict[str, Any]:
        """JSON-ready state for the state file."""
        return {
            "id": self.id,
            "offer": self.offer,
            "machine": self.machine.to_json(),
            "label": self.label,
            "onstart": self.onstart,
            "env": self.env,
            "bid_price": self.bid_price,
            "ssh_port": self.ssh_port,
            "host_ports": self.host_ports,
            "public_ip": self.public_ip,
            "extra": self.extra,
            "status_extra": self.status_extra,
            "drain_extra": self.drain_extra,
            "cuzk_refusal": self.cuzk_refusal,
            "cuzk_behaviour": self.cuzk_behaviour,
            "cuzk_rev": self.cuzk_rev,
            "cuzk_proofs": self.cuzk_proofs,
            "cuzk_bad": self.cuzk_bad,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SimInstance:
        """The instance `to_json` saved."""
        values = dict(data)
        values["machine"] = Machine.from_json(values["machine"])
        return cls(**values)

    # --------------------------------------------------------------- views

    def _ports(self) -> dict[str, list[dict[str, str]]]:
        if self.machine.status not in ("running", "frozen") or not self.host_ports:
            return {}
        return {
            name: [
                {"HostIp": "0.0.0.0", "HostPort": str(port)},
                {"HostIp": "::", "HostPort": str(port)},
            ]
            for name, port in self.host_ports.items()
        }

    def view(self) -> dict[str, Any]:
        """The instance row as the API shows it (its machine advanced by the caller)."""
        o, m = self.offer, self.machine
        running = m.status == "running"
        dph_total, storage_total_cost = prices(o, m.disk_gb, self.bid_price)
        ports = self._ports()
        host_ports = [int(p[0]["HostPort"]) for p in ports.values()]
        busy = running and m.phase == "proving" and m.error is None
        # A hung kernel keeps the GPU at 100 %: a stuck prover looks busy.
        gpu_util = 100.0 if busy and m.stuck else 90.0 + (self.id % 9) if busy else 0.0
        row: dict[str, Any] = {
            "id": self.id,
            "actual_status": m.status,
            "intended_status": m.intended,
            "cur_state": m.cur_state,
            "next_state": m.next_state,
            "status_msg": m.msg,
            "label": self.label,
            "image_uuid": m.image,
            "image_runtype": m.runtype,
            "image_args": [],
            "extra_env": [[k, v] for k, v in self.env.items()],
            "onstart": self.onstart,
            "template_id": None,
            "template_hash_id": None,
            "jupyter_token": f"{self.id:064x}"[-64:],
            "machine_id": o["machine_id"],
            "bundle_id": o["bundle_id"],
            "public_ipaddr": self.public_ip or o["public_ipaddr"],
            "local_ipaddrs": "172.17.0.2",
            "ssh_host": f"ssh{self.id % 9 + 1}.sim.vast.invalid",
            "ssh_idx": str(self.id % 9 + 1),
            "ssh_port": self.ssh_port,
            "machine_dir_ssh_port": self.ssh_port + 1,
            "direct_port_start": min(host_ports) if host_ports else -1,
            "direct_port_end": max(host_ports) if host_ports else -1,
            "ports": ports,
            "start_date": m.created_at,
            "end_date": o["end_date"],
            "duration": max(0.0, o["end_date"] - m.t),
            "uptime_mins": round(m.uptime_s() / 60.0, 2) if running else None,
            "is_bid": self.bid_price is not None,
            "min_bid": o["min_bid"],
            "dph_base": self.bid_price if self.bid_price is not None else o["dph_base"],
            "dph_total": dph_total,
            "storage_cost": o["storage_cost"],
            "storage_total_cost": storage_total_cost,
            "inet_up_cost": o["inet_up_cost"],
            "inet_down_cost": o["inet_down_cost"],
            # Traffic so far, cumulative, in KB (1,024 bytes): the parameter
            # download; nothing the simulator models is uploaded.
            "inet_down_billed": round(m.params_bytes / BYTES_PER_BILLED_KB, 3),
            "inet_up_billed": 0.0,
            "disk_space": m.disk_gb,
            "disk_usage": round(min(m.disk_gb, 8.0 + m.params_bytes / 1e9), 2),
            "disk_util": round(min(1.0, (8.0 + m.params_bytes / 1e9) / m.disk_gb), 4),
            "gpu_util": gpu_util,
            "cpu_util": 0.85 if busy else 0.35 if running and m.phase != "error" else 0.0,
            "mem_usage": None,
            "mem_limit": round(rental_ram_mb(o) / 1024.0, 3),
            "vmem_usage": None,
            "gpu_temp": 71.0 if running else None,
            "time_remaining": "",
            "rentable": False,
        }
        for key in _HOST_FIELDS:
            row.setdefault(key, o.get(key))
        row["gpu_totalram"] = o["gpu_total_ram"]
        if o["machine_id"] % 3 == 0:
            # Padded as some hosts' rows come: the vastai CLI strips every
            # string of an instance row for it (vastai/api/instances.py,
            # `show_instances`), and a client that does not reads
            # "1.2.3.4\n" as no address at all.
            row["public_ipaddr"] = f"{row['public_ipaddr']}\n"
            row["status_msg"] = f"{row['status_msg'] or ''} "
        row.update(self.extra)
        return row

    def prover_status(self, work_share: float = 1.0) -> dict[str, Any] | None:
        """The prover's ``GET /status`` answer, or None when nothing listens;
        the work source hands out `work_share` of its capacity."""
        m = self.machine
        if m.status != "running" or not m.starts_prover:
            return None
        return {**status_body(m, self.offer, m.t, work_share), **self.status_extra}

    def truth(self) -> dict[str, Any]:
        """What really happens, for the control API (never in an API row)."""
        m = self.machine
        rate = 0.0
        if m.proving_now():
            rate = offer_proof_rate(self.offer) * m.fate.rate_jitter
        return {
            "proofs_per_hour": round(rate, 3),
            "proofs_completed": math.floor(m.proofs),
            "prover_phase": m.phase if m.status == "running" and m.starts_prover else "off",
            "prover_stuck": m.stuck,
            # How its boot was drawn at rent time: run, stuck (never leaves
            # loading) or boot_fail: a benchmark's judge of a destroy.
            "boot_outcome": m.fate.outcome,
            "prover_error": m.error if m.phase == "error" else None,
            "expected_proofs_per_hour": round(offer_proof_rate(self.offer) * m.fate.rate_jitter, 3),
            "prover_blocker": prover_blocker(self.offer),
            "destroyed_at": m.destroyed_at,
            "cuzk": self.cuzk_truth(),
        }

    def cuzk_port(self) -> int | None:
        """The front's container port in router mode, when it is mapped (None otherwise)."""
        port = front_port(self.env)
        return port if port is not None and f"{port}/tcp" in self.host_ports else None

    def cuzk_truth(self) -> dict[str, Any] | None:
        """What the machine's cuzk really does (router mode; None otherwise):
        whether it serves, its GPUs, its true PoRep rate per sim hour kept
        busy (0 unless it serves; a slow host's less, a bad or trickling
        one's nothing that verifies) and its capacity regardless of the
        behaviour, sim seconds per proof of each kind on one GPU, what it
        answered COMPLETED by kind and in all, how many of those are bad."""
        port = self.cuzk_port()
        if port is None:
            return None
        m = self.machine
        capacity = offer_proof_rate(self.offer) * m.fate.rate_jitter
        if prover_blocker(self.offer) is not None:
            capacity = 0.0
        serving = cuzk_state(m, self.cuzk_refusal, prover_blocker(self.offer)) == "up"
        proving = serving and not m.stuck
        gpus = int(self.offer.get("num_gpus") or 0)
        return {
            "container_port": port,
            "host_port": self.host_ports[f"{port}/tcp"],
            "refusal": self.cuzk_refusal,
            "serving": serving,
            "gpus": gpus,
            "proofs_per_hour": round(
                true_proofs_per_hour(capacity, self.cuzk_behaviour) if proving else 0.0, 3
            ),
            "capacity_per_hour": round(capacity, 3),
            "seconds_per_proof": {k: round(v, 3) for k, v in proof_seconds(capacity, gpus).items()},
            "proofs_completed": sum(self.cuzk_proofs.values()),
            "proofs_by_kind": dict(self.cuzk_proofs),
            "bad_proofs": self.cuzk_bad,
            "behaviour": dict(self.cuzk_behaviour),
        }
