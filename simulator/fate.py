"""What is decided about a machine when it is rented, and the constants of its life.

`draw_fate` draws timings and failure details from the instance's own RNG;
`MachineEnv` is what a machine reads from its market while it advances.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from .faults import Faults

__all__ = [
    "DISK_NEEDED_GB",
    "FAULT_MESSAGES",
    "FINAL_STATUSES",
    "IMAGE_GB",
    "MEAN_RATE_JITTER",
    "PARAMS_BYTES",
    "PARAMS_SOURCE_MBPS",
    "PROVER_CUDA",
    "PROVER_FAULTS",
    "RATE_JITTER",
    "Fate",
    "MachineEnv",
    "draw_fate",
]

#: What a machine really proves, as a share of the capacity model's figure
#: for its offer, drawn per rental (hosts differ: clocks, cooling, the
#: neighbours on a shared box), and the mean of that draw: an unrented offer
#: is expected to prove its estimate times MEAN_RATE_JITTER.
RATE_JITTER = (0.93, 1.04)
MEAN_RATE_JITTER = sum(RATE_JITTER) / 2

#: Container statuses from which nothing comes back.
FINAL_STATUSES = frozenset({"exited", "offline", "unknown", "created"})
#: The 32 GiB PoRep, WindowPoSt and WinningPoSt parameters a prover fetches
#: once per machine (~47 GiB for PoRep alone; cuzk-project.md).
PARAMS_BYTES = 47 * 1024**3
#: Size of the prover image (CUDA runtime + prover), GB, for pull time and disk.
IMAGE_GB = 8.0
#: The parameter source's bandwidth, Mb/s: no host fetches faster (our assumption).
PARAMS_SOURCE_MBPS = 650.0
#: CUDA version the simulated prover image is built for.
PROVER_CUDA = 12.0
#: Disk the image and the parameters need, GB.
DISK_NEEDED_GB = IMAGE_GB + PARAMS_BYTES / 1e9 + 2.0


FAULT_MESSAGES = {
    "cuda_error": "CUDA error 700: an illegal memory access was encountered",
    "oom": "prover killed: out of memory (host RAM exhausted during synthesis)",
}
#: What can go wrong with a running prover (the control API's names).
PROVER_FAULTS = frozenset({*FAULT_MESSAGES, "stuck"})


@dataclass(frozen=True, slots=True)
class Fate:
    """What is decided at rent time."""

    provision_s: float
    loading_s: float
    outcome: str  # "run" | "stuck" | "boot_fail"
    fail_status: str
    fail_msg: str
    death_status: str
    death_msg: str
    rate_jitter: float
    fetch_bytes_per_s: float
    srs_load_s: float
    die_after_s: float | None = None  # the `die` fault: after first reaching running
    outbid_after_s: float | None = None  # the `outbid` fault: after first reaching running
    prover_fault: str | None = None  # the `*_next` prover faults: kind
    prover_fault_after_s: float = 0.0


_BOOT_FAILURES = (
    (
        "exited",
        "Error response from daemon: failed to create task for container: "
        'could not select device driver "" with capabilities: [[gpu]]',
    ),
    ("exited", "Error: no space left on device while extracting image layers"),
    ("offline", "host machine went offline during container start"),
    (
        "created",
        "Error response from daemon: failed to create shim task: OCI runtime create "
        "failed: runc create failed: unable to start container process: error during "
        "container init: nvidia-container-cli: device error: unknown device",
    ),
)
_DEATHS = (
    ("exited", "container exited with code 137 (OOM killed)"),
    ("exited", "container exited with code 1"),
    ("offline", "host machine is offline"),
    ("unknown", "no recent heartbeat from host"),
)


def draw_fate(
    rng: random.Random,
    *,
    inet_down: float,
    stuck: bool,
    boot_fail: bool,
    die_after_s: float | None,
    outbid_after_s: float | None,
    prover_fault: str | None,
    prover_fault_after_s: float,
) -> Fate:
    """Draw timings and failure details; the caller has decided the failures."""
    provision_s = rng.uniform(5.0, 40.0)
    loading_s = 15.0 + IMAGE_GB * 8000.0 / max(inet_down, 10.0) + rng.uniform(0.0, 60.0)
    fail_status, fail_msg = rng.choice(_BOOT_FAILURES)
    death_status, death_msg = rng.choice(_DEATHS)
    # Parameter downloads rarely fill the link, and the source has its own cap.
    mbps = min(max(inet_down, 10.0) * rng.uniform(0.5, 0.9), PARAMS_SOURCE_MBPS)
    outcome = "stuck" if stuck else "boot_fail" if boot_fail else "run"
    return Fate(
        provision_s=provision_s,
        loading_s=loading_s,
        outcome=outcome,
        fail_status=fail_status,
        fail_msg=fail_msg,
        death_status=death_status,
        death_msg=death_msg,
        rate_jitter=rng.uniform(*RATE_JITTER),
        fetch_bytes_per_s=mbps * 1e6 / 8.0,
        srs_load_s=rng.uniform(30.0, 90.0),
        die_after_s=die_after_s,
        outbid_after_s=outbid_after_s,
        prover_fault=prover_fault,
        prover_fault_after_s=prover_fault_after_s,
    )


class MachineEnv(Protocol):
    """What a machine reads from its market while it advances."""

    @property
    def faults(self) -> Faults:
        """The fault switches now."""

    def proof_rate(self) -> float:
        """Proofs/h this machine sustains while proving (0 if it cannot)."""

    def prover_blocker(self) -> str | None:
        """Why the prover cannot run on this machine (an error message), or None."""

    def death_hazard_per_hour(self) -> float:
        """Hazard of dying while running, per sim hour."""

    def outbid_hazard_per_hour(self) -> float:
        """Hazard of being outbid while running, per sim hour (0 on demand)."""
