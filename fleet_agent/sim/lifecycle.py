"""One rented machine's container and prover, as an event-driven state machine.

A `Machine` holds its state as of time ``t`` and a few pending timers
(provisioning done, boot done, death, outbid, reboot, prover phase done,
prover fault). `advance_to` fires the timers due up to a time, in time order,
drawing any new timer from the machine's own seeded RNG. Control events (stop,
start, freeze, reboot, kill, destroy) first advance to their time, then apply.
So the state at a time does not depend on how often anyone looked.

Container (``actual_status``): None while scheduling, ``loading``, ``running``,
``stopped``, ``frozen``, ``rebooting``, and the final ``exited``, ``offline``,
``unknown`` and ``created`` (a container that never starts). Prover phase
(only while running): ``fetching-params``, ``starting`` (SRS load),
``proving``, ``error``; a stuck prover stays ``proving`` and finishes nothing.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

from .faults import Faults

__all__ = [
    "FINAL_STATUSES",
    "PARAMS_BYTES",
    "PROVER_FAULTS",
    "Fate",
    "Machine",
    "MachineEnv",
    "draw_fate",
]

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

_OUTBID_RESUME_SHARE = 0.5
_OUTBID_RESUME_MEAN_S = 3600.0
_RESTART_LOADING_S = (10.0, 40.0)
_REBOOT_S = (60.0, 180.0)

_FAULT_MESSAGES = {
    "cuda_error": "CUDA error 700: an illegal memory access was encountered",
    "oom": "prover killed: out of memory (host RAM exhausted during synthesis)",
}
#: What can go wrong with a running prover (the control API's names).
PROVER_FAULTS = frozenset({*_FAULT_MESSAGES, "stuck"})


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
        rate_jitter=rng.uniform(0.93, 1.04),
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


@dataclass(slots=True)
class Machine:
    """The state of one rented machine at time `t`."""

    fate: Fate
    created_at: float
    t: float
    image: str
    runtype: str | None
    disk_gb: float
    #: Whether the container starts the prover (see `fleet_agent.sim.prover.starts_prover`).
    starts_prover: bool = True
    rng_state: Any = None
    status: str | None = None
    intended: str = "running"
    cur_state: str = "running"
    msg: str | None = None
    next_at: float | None = None
    next_kind: str | None = None
    death_at: float | None = None
    outbid_at: float | None = None
    reboot_at: float | None = None
    runs: int = 0
    running_since: float | None = None
    outbid_stopped: bool = False
    destroyed_at: float | None = None
    # Prover.
    phase: str = "off"
    phase_until: float | None = None
    params_bytes: float = 0.0
    prover_started_at: float | None = None
    stuck: bool = False
    proofs: float = 0.0
    proofs_failed: int = 0
    last_proof_at: float | None = None
    error: str | None = None
    fault_at: float | None = None
    fault_kind: str | None = None
    fault_used: bool = False
    frozen_left: dict[str, float] = field(default_factory=dict)
    _rng: random.Random | None = field(default=None, repr=False)

    @classmethod
    def rent(
        cls,
        fate: Fate,
        rng: random.Random,
        *,
        now: float,
        image: str,
        runtype: str | None,
        disk_gb: float,
        starts_prover: bool = True,
    ) -> Machine:
        """A machine rented at `now`: scheduling until provisioned."""
        m = cls(
            fate=fate,
            created_at=now,
            t=now,
            image=image,
            runtype=runtype,
            disk_gb=disk_gb,
            starts_prover=starts_prover,
        )
        m._rng = rng
        m.next_at, m.next_kind = now + fate.provision_s, "loading"
        return m

    # ------------------------------------------------------------ state io

    def to_json(self) -> dict[str, Any]:
        """JSON-ready state, RNG included (for the state file)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_rng"}
        data["fate"] = asdict(self.fate)
        data["rng_state"] = _rng_state(self.rng)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Machine:
        """The machine `to_json` saved."""
        values = dict(data)
        values["fate"] = Fate(**values["fate"])
        state = values.pop("rng_state")
        m = cls(**values)
        m._rng = random.Random()
        m._rng.setstate((state[0], tuple(state[1]), state[2]))
        return m

    @property
    def rng(self) -> random.Random:
        if self._rng is None:
            raise RuntimeError("machine has no RNG")
        return self._rng

    # ----------------------------------------------------------- advancing

    def _timers(self) -> list[tuple[float, str]]:
        pending = (
            (self.next_at, "status"),
            (self.death_at, "death"),
            (self.outbid_at, "outbid"),
            (self.reboot_at, "reboot"),
            (self.phase_until, "phase"),
            (self.fault_at, "fault"),
        )
        return [(at, name) for at, name in pending if at is not None]

    def advance_to(self, t: float, env: MachineEnv) -> None:
        """Fire every timer due up to `t`, in time order; accrue proofs and bytes."""
        while True:
            timers = self._timers()
            if not timers:
                break
            at, name = min(timers)
            if at > t:
                break
            self._accrue(at, env)
            self._fire(name, at, env)
        self._accrue(max(t, self.t), env)

    def _accrue(self, to: float, env: MachineEnv) -> None:
        span = to - self.t
        if span > 0 and self.status == "running":
            if self.phase == "proving" and not self.stuck:
                rate = env.proof_rate()
                if rate > 0:
                    before = self.proofs
                    self.proofs += rate * span / 3600.0
                    if math.floor(self.proofs) > math.floor(before):
                        done = math.floor(self.proofs)
                        self.last_proof_at = self.t + (done - before) * 3600.0 / rate
            elif self.phase == "fetching-params":
                cap = min(float(PARAMS_BYTES), self.disk_room())
                self.params_bytes = min(cap, self.params_bytes + self.fate.fetch_bytes_per_s * span)
        self.t = max(self.t, to)

    def _fire(self, name: str, at: float, env: MachineEnv) -> None:
        handlers: dict[str, Callable[[float, MachineEnv], None]] = {
            "status": self._on_status,
            "death": lambda t, e: self._die(t, self.fate.death_status, self.fate.death_msg),
            "outbid": self._on_outbid,
            "reboot": lambda t, e: self._reboot(t),
            "phase": self._on_phase_end,
            "fault": self._on_fault,
        }
        handlers[name](at, env)

    # ---------------------------------------------------------- container

    def _on_status(self, t: float, env: MachineEnv) -> None:
        kind, self.next_at, self.next_kind = self.next_kind, None, None
        if kind == "loading":
            self.status = "loading"
            self.msg = f"Pulling image {self.image}: downloading layers"
            self.next_at, self.next_kind = t + self.fate.loading_s, "boot_end"
        elif kind == "restart":
            self.status = "loading"
            self.msg = f"Starting container from cached image {self.image}"
            self.next_at, self.next_kind = t + self.rng.uniform(*_RESTART_LOADING_S), "boot_end"
        elif kind == "boot_end":
            if self.runs == 0 and self.fate.outcome == "stuck":
                return  # never leaves loading
            if self.runs == 0 and self.fate.outcome == "boot_fail":
                self._die(t, self.fate.fail_status, self.fate.fail_msg)
                return
            self._enter_running(t, env, restart_prover=True)
        elif kind == "resume":
            self.outbid_stopped = False
            if self.intended == "running":
                self.next_at, self.next_kind = t, "restart"
        elif kind == "reboot_end":
            self._enter_running(t, env, restart_prover=True)

    def _enter_running(self, t: float, env: MachineEnv, *, restart_prover: bool) -> None:
        first = self.runs == 0
        self.runs += 1
        self.status, self.cur_state = "running", "running"
        self.msg = f"success, running {self.image}/{self.runtype or 'ssh'}"
        self.running_since = t
        faults = env.faults
        if first and self.fate.die_after_s is not None:
            self.death_at = t + self.fate.die_after_s
        else:
            self.death_at = _after(self.rng, t, env.death_hazard_per_hour())
        if first and self.fate.outbid_after_s is not None:
            self.outbid_at = t + self.fate.outbid_after_s
        else:
            self.outbid_at = _after(self.rng, t, env.outbid_hazard_per_hour())
        self.reboot_at = _after(self.rng, t, faults.reboot_rate_per_hour)
        if restart_prover:
            self._start_prover(t)

    def _leave_running(self, t: float) -> None:
        self.death_at = self.outbid_at = self.reboot_at = None
        self.running_since = None
        self._stop_prover()

    def _die(self, t: float, status: str, msg: str) -> None:
        self._leave_running(t)
        self.next_at = self.next_kind = None
        self.status, self.msg = status, msg
        self.frozen_left = {}

    def _on_outbid(self, t: float, env: MachineEnv) -> None:
        self._leave_running(t)
        self.status, self.cur_state, self.outbid_stopped = "stopped", "stopped", True
        self.msg = "Instance stopped: outbid (a higher bid or an on-demand rental took its GPUs)"
        if self.rng.random() < _OUTBID_RESUME_SHARE:
            wait = self.rng.expovariate(1.0 / _OUTBID_RESUME_MEAN_S)
            self.next_at, self.next_kind = t + wait, "resume"

    def _reboot(self, t: float) -> None:
        self._leave_running(t)
        self.status, self.msg = "rebooting", "Rebooting instance (host restart)"
        self.next_at, self.next_kind = t + self.rng.uniform(*_REBOOT_S), "reboot_end"

    # -------------------------------------------------------------- prover

    def _start_prover(self, t: float) -> None:
        if not self.starts_prover:
            return  # the container runs, nothing in it proves
        self.prover_started_at = t
        self.stuck, self.error = False, None
        if self.params_bytes < PARAMS_BYTES:
            self._set_phase(t, "fetching-params")
        else:
            self._set_phase(t, "starting")

    def disk_room(self) -> float:
        """Bytes of disk left for the parameters once the image is in."""
        return max(0.0, (self.disk_gb - IMAGE_GB - 2.0) * 1e9)

    def _stop_prover(self) -> None:
        # Proofs in flight are lost with the process.
        self.proofs = math.floor(self.proofs)
        self.phase, self.phase_until = "off", None
        self.fault_at = self.fault_kind = None
        self.stuck = False
        self.prover_started_at = None

    def _set_phase(self, t: float, phase: str) -> None:
        self.phase, self.phase_until = phase, None
        if phase == "fetching-params":
            target = min(float(PARAMS_BYTES), self.disk_room())
            left = max(0.0, target - self.params_bytes)
            self.phase_until = t + left / self.fate.fetch_bytes_per_s
        elif phase == "starting":
            self.phase_until = t + self.fate.srs_load_s

    def _on_phase_end(self, t: float, env: MachineEnv) -> None:
        if self.phase == "fetching-params":
            if self.disk_room() < PARAMS_BYTES:
                self.params_bytes = self.disk_room()
                self._fail(t, "parameter fetch failed: no space left on device")
            else:
                self.params_bytes = float(PARAMS_BYTES)  # exactly, whatever the float sums
                self._set_phase(t, "starting")
        elif self.phase == "starting":
            blocker = env.prover_blocker()
            if blocker is not None:
                self._fail(t, blocker)
                return
            self._set_phase(t, "proving")
            self._schedule_fault(t, env.faults)

    def _schedule_fault(self, t: float, faults: Faults) -> None:
        if self.fate.prover_fault is not None and not self.fault_used:
            self.fault_used = True
            self.fault_at = t + self.fate.prover_fault_after_s
            self.fault_kind = self.fate.prover_fault
            return
        hazards = {
            "cuda_error": faults.cuda_error_rate_per_hour,
            "oom": faults.oom_rate_per_hour,
            "stuck": faults.prover_stuck_rate_per_hour,
        }
        total = sum(hazards.values())
        at = _after(self.rng, t, total)
        if at is None:
            return
        pick = self.rng.random() * total
        for kind, hazard in hazards.items():
            pick -= hazard
            if pick < 0:
                self.fault_at, self.fault_kind = at, kind
                return

    def _on_fault(self, t: float, env: MachineEnv) -> None:
        kind = self.fault_kind or "cuda_error"
        self.fault_at = self.fault_kind = None
        self._prover_fault(t, kind)

    def _prover_fault(self, t: float, kind: str) -> bool:
        if self.status != "running" or self.phase != "proving" or self.stuck:
            return False
        if kind == "stuck":
            self.stuck = True
            self.fault_at = self.fault_kind = None
            return True
        self.proofs_failed += 1
        self._fail(t, _FAULT_MESSAGES[kind])
        return True

    def _fail(self, t: float, message: str) -> None:
        self.proofs = math.floor(self.proofs)  # the proofs in flight die with the prover
        self.phase, self.phase_until, self.error = "error", None, message
        self.fault_at = self.fault_kind = None

    # ----------------------------------------------------- control events

    def prover_fault(self, t: float, kind: str, env: MachineEnv) -> bool:
        """A CUDA error, OOM kill or stuck prover now; False if it is not proving."""
        if kind != "stuck" and kind not in _FAULT_MESSAGES:
            raise ValueError(f"unknown prover fault {kind!r}")
        self.advance_to(t, env)
        return self._prover_fault(t, kind)

    def kill(self, t: float, status: str, msg: str, env: MachineEnv) -> None:
        """Die now (no effect once dead)."""
        self.advance_to(t, env)
        if self.status not in FINAL_STATUSES and self.destroyed_at is None:
            self._die(t, status, msg)

    def stop(self, t: float, env: MachineEnv) -> None:
        """The renter stops it: container halted, disk kept, no GPU charges."""
        self.advance_to(t, env)
        if self.status in FINAL_STATUSES or self.destroyed_at is not None:
            return
        self._leave_running(t)
        self.frozen_left = {}
        self.next_at = self.next_kind = None
        self.intended, self.status, self.cur_state = "stopped", "stopped", "stopped"
        self.msg = "Instance stopped by user"

    def start(self, t: float, env: MachineEnv) -> None:
        """The renter starts a stopped instance (waits while it is outbid)."""
        self.advance_to(t, env)
        if self.status != "stopped":
            return
        self.intended = "running"
        if not self.outbid_stopped:
            self.next_at, self.next_kind = t, "restart"
            self.advance_to(t, env)

    def reboot(self, t: float, env: MachineEnv) -> bool:
        """Restart the container now; False unless it is running."""
        self.advance_to(t, env)
        if self.status != "running":
            return False
        self._reboot(t)
        return True

    def freeze(self, t: float, env: MachineEnv) -> bool:
        """Pause the container with its memory kept; False unless it is running."""
        self.advance_to(t, env)
        if self.status != "running":
            return False
        self.frozen_left = {
            name: at - t
            for name, at in (("phase", self.phase_until), ("fault", self.fault_at))
            if at is not None
        }
        self.phase_until = self.fault_at = None
        self.death_at = self.outbid_at = self.reboot_at = None
        self.status, self.intended = "frozen", "frozen"
        self.msg = "Instance frozen (container paused, memory kept)"
        return True

    def unfreeze(self, t: float, env: MachineEnv) -> bool:
        """Resume a frozen container where it was; False unless it is frozen."""
        self.advance_to(t, env)
        if self.status != "frozen":
            return False
        left = self.frozen_left
        self.frozen_left = {}
        self.intended = "running"
        self.runs = max(self.runs, 1)
        self._enter_running(t, env, restart_prover=False)
        if "phase" in left:
            self.phase_until = t + left["phase"]
        if "fault" in left and self.fault_kind is not None:
            self.fault_at = t + left["fault"]
        return True

    def destroy(self, t: float, env: MachineEnv) -> None:
        """Released: listed with ``cur_state: unloaded`` until the market drops it."""
        self.advance_to(t, env)
        self._leave_running(t)
        self.next_at = self.next_kind = None
        self.frozen_left = {}
        self.destroyed_at = t
        self.intended, self.cur_state = "stopped", "unloaded"
        if self.status not in FINAL_STATUSES:
            self.status = "exited"
        self.msg = "Instance destroyed; its resources are being released"

    # -------------------------------------------------------------- views

    @property
    def next_state(self) -> str:
        """The contract's next state, as ``next_state`` shows it."""
        if self.destroyed_at is not None:
            return "unloaded"
        return "stopped" if self.intended == "stopped" else "running"

    def uptime_s(self) -> float:
        """Seconds in the current running spell (0 unless running)."""
        if self.status != "running" or self.running_since is None:
            return 0.0
        return max(0.0, self.t - self.running_since)

    def proving_now(self) -> bool:
        """Running, proving and not stuck: proofs are being finished."""
        return self.status == "running" and self.phase == "proving" and not self.stuck


def _after(rng: random.Random, t: float, hazard_per_hour: float) -> float | None:
    """When an event of this hazard happens next, or None if it never does."""
    if hazard_per_hour <= 0:
        return None
    return t + rng.expovariate(hazard_per_hour / 3600.0)


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]
