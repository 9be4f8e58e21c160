"""How a cuzk stand-in is set up: GPUs, proof times, circuits, and its behaviour.

Times are in simulated seconds; the stand-in divides each by `speed`, so a
test runs a 53 s PoRep in 0.05 s with ``speed=1060`` or with
``proof_seconds={"porep-c2": 0.05}``. Plain data, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DEFAULT_PROOF_SECONDS", "Behaviour", "Mode", "StandInConfig"]

#: How a stand-in behaves towards the router:
#: ``honest``  proves at its configured speed;
#: ``slow``    each proof takes `Behaviour.slow_factor` times as long;
#: ``dies``    after `die_after_proofs` proofs (half-way through the next) or at
#:             `die_at_s`, the server stops: calls in flight fail, connections drop;
#: ``lies``    proves honestly but GetStatus claims huge totals and idle GPUs;
#: ``bad``     answers COMPLETED with wrong proof bytes of the right length;
#: ``trickle`` every answer waits `trickle_s`; Prove never answers.
Mode = Literal["honest", "slow", "dies", "lies", "bad", "trickle"]

#: Seconds per proof by kind (cuzk's Display names). PoRep: the 256 GiB row of
#: curio ``documentation/en/experimental-features/cuzk-proving-daemon.md``
#: (7 partition workers, ~53 s); the others are guesses in proportion
#: (a SnapDeals proof is smaller, PoSt partitions much smaller).
DEFAULT_PROOF_SECONDS: dict[str, float] = {
    "porep-c2": 53.0,
    "snap-update": 40.0,
    "window-post": 20.0,
    "winning-post": 2.0,
}


@dataclass(frozen=True)
class Behaviour:
    """What kind of host this stand-in plays (see `Mode`)."""

    mode: Mode = "honest"
    slow_factor: float = 3.0
    #: ``dies``: proofs completed before it dies half-way through the next.
    die_after_proofs: int | None = None
    #: ``dies``: simulated seconds after start when it dies, proving or not.
    die_at_s: float | None = None
    #: ``trickle``: simulated seconds each answer waits.
    trickle_s: float = 5.0
    #: ``lies``: the GPU count and totals its GetStatus claims.
    claimed_gpus: int = 64
    claimed_total: int = 10**12


@dataclass(frozen=True)
class StandInConfig:
    """One simulated cuzk daemon."""

    gpus: int = 1
    proof_seconds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_PROOF_SECONDS))
    #: Simulated seconds per real second: every delay is divided by it.
    speed: float = 1.0
    #: Circuits loaded at start (as if PreloadSRS had been called for each).
    preload: tuple[str, ...] = ("porep-32g",)
    #: Simulated seconds a PreloadSRS (or an on-demand load) takes.
    preload_seconds: float = 30.0
    behaviour: Behaviour = field(default_factory=Behaviour)
    #: What nvidia-smi would report for each GPU (service.rs ``detect_gpus``).
    gpu_name: str = "NVIDIA GeForce RTX 4090"
    vram_total_bytes: int = 24564 * 1024 * 1024

    def __post_init__(self) -> None:
        if self.gpus < 0:
            raise ValueError("gpus must be >= 0")
        if self.speed <= 0:
            raise ValueError("speed must be > 0")

    def real(self, sim_seconds: float) -> float:
        """Real seconds for `sim_seconds` of simulated time."""
        return sim_seconds / self.speed
