"""The router's settings, each with why it has its default.

Plain data (no I/O); `RouterConfig.from_env` reads ``FLEET_ROUTER_*``
variables for the process entry point. Tests shrink the times.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from fleet_agent.cuzk.witness import REJECTIONS_TO_REPLACE

__all__ = [
    "ATTEMPT_FACTOR",
    "DEAD_AFTER_S",
    "DEFAULT_EXPECTED_SECONDS",
    "FAIL_STREAK",
    "MAX_GPUS_COUNTED",
    "MAX_HELD_BYTES",
    "PER_GPU_DEPTH",
    "REJECT_LIMIT",
    "RouterConfig",
]

#: A machine holds at most this many jobs per GPU: one proving, one queued
#: behind it, so the GPU never idles between proofs and a death loses little.
PER_GPU_DEPTH = 2
#: GPUs a member's GetStatus may claim that we count for spreading. The count
#: is the host's word: a liar claiming 64 gets at most this many (and its
#: extra jobs time out, which makes it `failing`). vast.ai hosts have <= 10.
#: When the agent names the GPUs rented (`MemberSpec.gpus`), that bounds it.
MAX_GPUS_COUNTED = 16
#: An attempt may take this many expected proof times: a job can wait behind
#: one proof on the machine and then prove, slower than expected.
ATTEMPT_FACTOR = 3.0
#: Failures or timeouts in a row that make a machine `failing`.
FAIL_STREAK = 3
#: Answers Curio rejected (same request_id sent again after COMPLETED) that
#: make a machine `failing`: one could be bad luck, two is a bad prover.
REJECT_LIMIT = REJECTIONS_TO_REPLACE
#: A member whose cuzk has not answered GetStatus for this long is `dead`.
DEAD_AFTER_S = 60.0
#: Bytes of inputs (vanilla proofs, 50-200 MB each) the router holds; a
#: Submit past it is refused with RESOURCE_EXHAUSTED and Curio retries.
MAX_HELD_BYTES = 4 * 1024**3
#: Expected seconds per proof by kind (cuzk's Display names), for attempt
#: timeouts and the queue's proving seconds. PoRep: the slowest row of
#: curio's cuzk-proving-daemon.md RAM table (128 GiB, ~152 s); the others in
#: proportion. Slower is safer here: too short a budget re-sends good work.
DEFAULT_EXPECTED_SECONDS: dict[str, float] = {
    "porep-c2": 150.0,
    "snap-update": 120.0,
    "window-post": 60.0,
    "winning-post": 10.0,
}


@dataclass(frozen=True)
class RouterConfig:
    """Everything the router's behaviour depends on besides its members."""

    per_gpu_depth: int = PER_GPU_DEPTH
    max_gpus_counted: int = MAX_GPUS_COUNTED
    attempt_factor: float = ATTEMPT_FACTOR
    #: An attempt gets at least this long, whatever the expected time says.
    min_attempt_s: float = 30.0
    fail_streak: int = FAIL_STREAK
    reject_limit: int = REJECT_LIMIT
    dead_after_s: float = DEAD_AFTER_S
    max_held_bytes: int = MAX_HELD_BYTES
    expected_seconds: dict[str, float] = field(
        default_factory=lambda: dict(DEFAULT_EXPECTED_SECONDS)
    )
    #: How often each member's GetStatus is read (router/store_sync.py reads members every 2 s).
    poll_s: float = 2.0
    #: A GetStatus gets this long (Curio's client gives its own 5 s).
    status_timeout_s: float = 5.0
    #: Circuits every member is asked to load (PreloadSRS) before it serves:
    #: cuzk lists only preloaded circuits as loaded (engine.rs preload_srs).
    circuits: tuple[str, ...] = ("porep-32g",)
    #: A PreloadSRS may take this long (a 32 GiB PoRep's SRS is ~47 GiB on disk).
    preload_timeout_s: float = 900.0
    #: A Prove or Submit without a gRPC deadline (ProveTimeout 0) gets this one.
    default_deadline_s: float = 4 * 3600.0
    #: The router answers this long before the caller's deadline, so the answer
    #: (or TIMEOUT) arrives before Curio's own context expires.
    answer_margin_s: float = 1.0
    #: Sends of one job before it fails: a proof no machine can make is not retried forever.
    max_attempts: int = 6
    #: How often drain bounds and job deadlines are checked.
    tick_s: float = 1.0
    #: Window of the measured rate (proofs per busy hour).
    rate_window_s: float = 3600.0
    #: Answers remembered for rejection detection; a rejected proof comes back
    #: when harmony retries the task, minutes to hours later.
    remember_answers: int = 100_000
    remember_answers_s: float = 24 * 3600.0
    #: Answer bodies kept (~2 KB each) for AwaitProof and a caller that lost one.
    keep_results: int = 1000
    #: Return the allocator's free memory to the system after inputs arrive
    #: (router/memory.py), at most once a tick: RSS then follows the held bytes.
    trim_memory: bool = True
    #: GetStatus's pending when the held bytes are at the cap: Curio's
    #: HasCapacity (MaxPending - pending - in_progress) then sees no room.
    full_pending: int = 10_000

    def expected(self, kind: str) -> float:
        """Expected seconds of one proof of `kind` (a Display name)."""
        return self.expected_seconds.get(kind, max(self.expected_seconds.values(), default=150.0))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RouterConfig:
        """Defaults, with ``FLEET_ROUTER_MAX_HELD_BYTES`` and ``FLEET_ROUTER_CIRCUITS``
        (comma-separated) applied."""
        env = os.environ if env is None else env
        cfg = cls()
        if held := env.get("FLEET_ROUTER_MAX_HELD_BYTES"):
            cfg = replace(cfg, max_held_bytes=int(held))
        if circuits := env.get("FLEET_ROUTER_CIRCUITS"):
            cfg = replace(cfg, circuits=tuple(c.strip() for c in circuits.split(",") if c.strip()))
        return cfg
