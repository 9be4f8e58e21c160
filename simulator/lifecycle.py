"""One rented machine's container and prover, as an event-driven state machine.

A `Machine` holds its state as of time ``t`` and a few pending timers
(provisioning done, boot done, death, outbid, reboot, prover phase done,
prover fault). `advance_to` fires the timers due up to a time, in time order,
drawing any new timer from the machine's own seeded RNG. Control events (stop,
start, freeze, reboot, kill, destroy) first advance to their time, then apply.
So the state at a time does not depend on how often anyone looked.

Layers: `simulator.fate` (what is drawn at rent time and the
constants), `simulator.machine_state` (the fields, saving, views),
`simulator.prover_phases` (the prover), and this module (timers,
container transitions, control events).

Container (``actual_status``): None while scheduling, ``loading``, ``running``,
``stopped``, ``frozen``, ``rebooting``, and the final ``exited``, ``offline``,
``unknown`` and ``created`` (a container that never starts). Prover phase
(only while running): ``fetching_params``, ``starting`` (SRS load),
``proving``, ``error``; a stuck prover stays ``proving`` and finishes nothing.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from .fate import (
    FINAL_STATUSES,
    PARAMS_BYTES,
    PROVER_FAULTS,
    Fate,
    MachineEnv,
    draw_fate,
)
from .machine_state import after
from .prover_phases import ProverPhases

__all__ = [
    "FINAL_STATUSES",
    "PARAMS_BYTES",
    "PROVER_FAULTS",
    "Fate",
    "Machine",
    "MachineEnv",
    "draw_fate",
]

_OUTBID_RESUME_SHARE = 0.5
_OUTBID_RESUME_MEAN_S = 3600.0
_RESTART_LOADING_S = (10.0, 40.0)
_REBOOT_S = (60.0, 180.0)


class Machine(ProverPhases):
    """A rented machine: its state advanced by timers and control events."""

    __slots__ = ()

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

    # ----------------------------------------------------------- advancing

    def _timers(self) -> list[tuple[float, str]]:
        pending = (
            (self.next_at, "status"),
            (self.death_at, "death"),
            (self.outbid_at, "outbid"),
            (self.reboot_at, "reboot"),
            (self.phase_until, "phase"),
            (self.fault_at, "fault"),
            (self.blip_at, "blip"),
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
        if span > 0 and self.status == "stopped" and self.destroyed_at is None:
            self.stopped_s += span  # billed at the storage rate only
        if span > 0 and self.status == "running":
            if self.phase == "proving" and self.draining and not self.stuck:
                self._accrue_drain(span, env)
            elif self.phase == "proving" and self.stuck:
                self.busy_s += span  # it holds its work and finishes none
            elif self.phase == "proving":
                # Work comes at the source's share of capacity: busy that share
                # of the time, proving at the full rate while busy.
                share = env.faults.work_share
                rate = env.proof_rate() * share
                if rate > 0:
                    before, busy_before = self.proofs, self.busy_s
                    self.proofs += rate * span / 3600.0
                    self.busy_s += share * span
                    if math.floor(self.proofs) > math.floor(before):
                        done = math.floor(self.proofs)
                        wall = (done - before) * 3600.0 / rate
                        self.last_proof_at = self.t + wall
                        self.last_proof_busy_s = busy_before + share * wall
            elif self.phase == "fetching_params":
                cap = min(float(PARAMS_BYTES), self.disk_room())
                self.params_bytes = min(cap, self.params_bytes + self.fate.fetch_bytes_per_s * span)
        self.t = max(self.t, to)

    def _accrue_drain(self, span: float, env: MachineEnv) -> None:
        """A draining prover finishes its work in flight at its full rate, then idles."""
        target, rate = self.drain_target, env.proof_rate()
        if target is None or rate <= 0 or self.proofs >= target:
            return
        left = (target - self.proofs) * 3600.0 / rate
        used = min(span, left)
        before = self.proofs
        self.proofs = target if used >= left else self.proofs + rate * used / 3600.0
        self.busy_s += used
        if math.floor(self.proofs) > math.floor(before):
            wall = (math.floor(self.proofs) - before) * 3600.0 / rate
            self.last_proof_at = self.t + wall
            self.last_proof_busy_s = self.busy_s - used + wall

    def drain(self, t: float, env: MachineEnv, in_flight: int) -> bool:
        """Take no new work from now; the `in_flight` proofs finish. False
        unless its prover is proving."""
        self.advance_to(t, env)
        if self.status != "running" or self.phase != "proving":
            return False
        if not self.draining:
            self.draining = True
            held = in_flight if env.faults.work_share > 0 or self.stuck else 0
            self.drain_target = math.floor(self.proofs) + held
        return True

    def _fire(self, name: str, at: float, env: MachineEnv) -> None:
        handlers: dict[str, Callable[[float, MachineEnv], None]] = {
            "status": self._on_status,
            "death": lambda t, e: self._die(t, self.fate.death_status, self.fate.death_msg),
            "outbid": self._on_outbid,
            "reboot": lambda t, e: self._reboot(t),
            "phase": self._on_phase_end,
            "fault": self._on_fault,
            "blip": self._on_blip,
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
        elif kind == "blip_end":
            self._resume(t, env)

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
            self.death_at = after(self.rng, t, env.death_hazard_per_hour())
        if first and self.fate.outbid_after_s is not None:
            self.outbid_at = t + self.fate.outbid_after_s
        else:
            self.outbid_at = after(self.rng, t, env.outbid_hazard_per_hour())
        self.reboot_at = after(self.rng, t, faults.reboot_rate_per_hour)
        # No draw when off: the machines' other draws stay as they were.
        self.blip_at = after(self.rng, t, faults.offline_blip_rate_per_hour)
        if restart_prover:
            self._start_prover(t)

    def _leave_running(self, t: float) -> None:
        self.death_at = self.outbid_at = self.reboot_at = self.blip_at = None
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

    def _pause(self, t: float) -> None:
        """Hold the container where it is: its prover's timers wait (freeze, blip)."""
        self.frozen_left = {
            name: at - t
            for name, at in (("phase", self.phase_until), ("fault", self.fault_at))
            if at is not None
        }
        self.phase_until = self.fault_at = None
        self.death_at = self.outbid_at = self.reboot_at = self.blip_at = None

    def _resume(self, t: float, env: MachineEnv) -> None:
        """Run again where `_pause` held it, the same prover process."""
        left = self.frozen_left
        self.frozen_left = {}
        self.runs = max(self.runs, 1)
        self._enter_running(t, env, restart_prover=False)
        if "phase" in left:
            self.phase_until = t + left["phase"]
        if "fault" in left and self.fault_kind is not None:
            self.fault_at = t + left["fault"]

    def _on_blip(self, t: float, env: MachineEnv) -> None:
        """The host loses contact for a while, then comes back as it was."""
        self._pause(t)
        self.status, self.msg = "offline", "host machine is offline (no recent heartbeat)"
        self.next_at, self.next_kind = t + env.faults.offline_blip_s, "blip_end"

    def _reboot(self, t: float) -> None:
        self._leave_running(t)
        self.status, self.msg = "rebooting", "Rebooting instance (host restart)"
        self.next_at, self.next_kind = t + self.rng.uniform(*_REBOOT_S), "reboot_end"

    # ----------------------------------------------------- control events

    def prover_fault(self, t: float, kind: str, env: MachineEnv) -> bool:
        """A CUDA error, OOM kill or stuck prover now; False if it is not proving."""
        if kind not in PROVER_FAULTS:
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

    def blip(self, t: float, env: MachineEnv) -> bool:
        """The host loses contact now, for the `offline_blip_s` fault; False
        unless it is running."""
        self.advance_to(t, env)
        if self.status != "running":
            return False
        self._on_blip(t, env)
        return True

    def freeze(self, t: float, env: MachineEnv) -> bool:
        """Pause the container with its memory kept; False unless it is running."""
        self.advance_to(t, env)
        if self.status != "running":
            return False
        self._pause(t)
        self.status, self.intended = "frozen", "frozen"
        self.msg = "Instance frozen (container paused, memory kept)"
        return True

    def unfreeze(self, t: float, env: MachineEnv) -> bool:
        """Resume a frozen container where it was; False unless it is frozen."""
        self.advance_to(t, env)
        if self.status != "frozen":
            return False
        self.intended = "running"
        self._resume(t, env)
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
