"""The prover inside a running container: fetching parameters, loading them,
proving, failing. A layer of `simulator.lifecycle.Machine`."""

from __future__ import annotations

import math

from .fate import FAULT_MESSAGES, IMAGE_GB, PARAMS_BYTES, MachineEnv
from .faults import Faults
from .machine_state import MachineState, after

__all__ = ["ProverPhases"]


class ProverPhases(MachineState):
    """Prover phases and faults, on a machine's state."""

    __slots__ = ()

    def _start_prover(self, t: float) -> None:
        if not self.starts_prover:
            return  # the container runs, nothing in it proves
        self.prover_started_at = t
        self.proofs_at_start, self.failed_at_start = math.floor(self.proofs), self.proofs_failed
        self.busy_at_start, self.last_proof_busy_s = self.busy_s, None
        self.stuck, self.error = False, None
        if self.params_bytes < PARAMS_BYTES:
            self._set_phase(t, "fetching_params")
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
        if phase == "fetching_params":
            target = min(float(PARAMS_BYTES), self.disk_room())
            left = max(0.0, target - self.params_bytes)
            self.phase_until = t + left / self.fate.fetch_bytes_per_s
        elif phase == "starting":
            self.phase_until = t + self.fate.srs_load_s

    def _on_phase_end(self, t: float, env: MachineEnv) -> None:
        if self.phase == "fetching_params":
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
        at = after(self.rng, t, total)
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
        self._fail(t, FAULT_MESSAGES[kind])
        return True

    def _fail(self, t: float, message: str) -> None:
        self.proofs = math.floor(self.proofs)  # the proofs in flight die with the prover
        self.phase, self.phase_until, self.error = "error", None, message
        self.fault_at = self.fault_kind = None
