"""A rented machine's state: its fields, how they are saved, and what they show.

The behaviour is layered on top: `simulator.prover_phases.ProverPhases`
(the prover's phases), then `simulator.lifecycle.Machine` (timers,
container transitions, control events).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Self

from .fate import Fate

__all__ = ["MachineState", "after"]


@dataclass(slots=True)
class MachineState:
    """The state of one rented machine at time `t`."""

    fate: Fate
    created_at: float
    t: float
    image: str
    runtype: str | None
    disk_gb: float
    #: Whether the container starts the prover (see `simulator.prover.starts_prover`).
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
    #: Seconds spent ``stopped`` before `destroyed_at` (billed storage only; see
    #: `simulator.instances.SimInstance.charges`).
    stopped_s: float = 0.0
    # Prover.
    phase: str = "off"
    phase_until: float | None = None
    params_bytes: float = 0.0
    prover_started_at: float | None = None
    stuck: bool = False
    #: Proofs finished and failed over the machine's life (the truth)...
    proofs: float = 0.0
    proofs_failed: int = 0
    #: ...and their values when the prover process last started (its counters start there).
    proofs_at_start: int = 0
    failed_at_start: int = 0
    last_proof_at: float | None = None
    error: str | None = None
    fault_at: float | None = None
    fault_kind: str | None = None
    fault_used: bool = False
    frozen_left: dict[str, float] = field(default_factory=dict)
    #: Seconds the prover had work in flight (the work source's share of its
    #: proving time), over the machine's life and at its process's start, and
    #: at its last finished proof.
    busy_s: float = 0.0
    busy_at_start: float = 0.0
    last_proof_busy_s: float | None = None
    #: When the host next loses contact (the offline blip fault).
    blip_at: float | None = None
    #: A drain was asked (`POST /drain`): no new work; the proofs in flight
    #: then finish, up to `drain_target` proofs over the machine's life.
    draining: bool = False
    drain_target: float | None = None
    _rng: random.Random | None = field(default=None, repr=False)

    # ------------------------------------------------------------ state io

    def to_json(self) -> dict[str, Any]:
        """JSON-ready state, RNG included (for the state file)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "_rng"}
        data["fate"] = asdict(self.fate)
        data["rng_state"] = _rng_state(self.rng)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
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


def after(rng: random.Random, t: float, hazard_per_hour: float) -> float | None:
    """When an event of this hazard happens next, or None if it never does."""
    if hazard_per_hour <= 0:
        return None
    return t + rng.expovariate(hazard_per_hour / 3600.0)


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]
