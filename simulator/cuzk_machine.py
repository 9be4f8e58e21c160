"""A simulated machine in router mode: what its cuzk is, as pure rules.

A create whose environment carries the router path's variables
(fleet_agent/cuzk/credentials.py ``machine_env``: ``FLEET_FRONT_CERT``,
``FLEET_FRONT_KEY``, ``FLEET_ROUTER_CA``, ``FLEET_FRONT_PORT``) runs the
router image (prover_image/): cuzk on loopback behind the TLS front on the
container port ``FLEET_FRONT_PORT`` (default 9821, which the image EXPOSEs).
This module says, from the create and the machine's state, whether that
image would start at all (`front_context`, with the image's own checks),
whether its cuzk is up (`cuzk_view`), how fast it proves (`proof_seconds`),
and how a hostile host's cuzk behaves (`behaviour_spec`, `behaviour`).
No I/O but `front_context`'s private temporary files (the entrypoint's own).
simulator/cuzk_hosts.py serves what these rules say.
"""

from __future__ import annotations

import math
import os
import ssl
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from fleet_agent.cuzk.credentials import DEFAULT_FRONT_PORT
from prover_image import entrypoint

from .cuzk.config import DEFAULT_PROOF_SECONDS, Behaviour, Mode
from .fate import PARAMS_BYTES
from .lifecycle import Machine

__all__ = [
    "FRONT_VARIABLES",
    "RELATIVE_COST",
    "CuzkView",
    "behaviour",
    "behaviour_spec",
    "cuzk_state",
    "cuzk_view",
    "front_context",
    "front_port",
    "proof_seconds",
    "true_proofs_per_hour",
]

#: What a create carries for the router path (credentials.py ``machine_env``).
FRONT_VARIABLES = ("FLEET_FRONT_CERT", "FLEET_FRONT_KEY", "FLEET_ROUTER_CA", "FLEET_FRONT_PORT")
#: A proof kind's cost relative to a PoRep C2 (cuzk's Display names). The
#: stand-in's proportions (simulator/cuzk/config.py ``DEFAULT_PROOF_SECONDS``:
#: PoRep from curio's cuzk RAM table, the others guesses in proportion); the
#: capacity model (fleet_agent/fleet/capacity.py) gives PoRep's.
RELATIVE_COST: dict[str, float] = {
    kind: seconds / DEFAULT_PROOF_SECONDS["porep-c2"]
    for kind, seconds in DEFAULT_PROOF_SECONDS.items()
}
#: The stand-in's GPUs as nvidia-smi names them when the catalogue does not.
_VRAM_MB_DEFAULT = 24_564

State = Literal["up", "down", "frozen"]


def front_port(env: dict[str, str]) -> int | None:
    """The container port of the machine's front when its create is in router
    mode (any of `FRONT_VARIABLES` set), else None. An unreadable port is the
    default's (the entrypoint then refuses: `front_context`)."""
    if not any(name in env for name in FRONT_VARIABLES):
        return None
    raw = env.get("FLEET_FRONT_PORT", "").strip()
    return int(raw) if raw.isdigit() and 1 <= int(raw) <= 65535 else DEFAULT_FRONT_PORT


def front_context(env: dict[str, str], ram_mb: float) -> tuple[ssl.SSLContext | None, str | None]:
    """(the front's TLS context, None), or (None, why the image would not
    start): prover_image/entrypoint.py's own checks, run on the create's
    router variables (``read_settings``: each credential base64 of a PEM;
    ``sizing``: at least 128 GiB of RAM, here the rental's share; and
    ``tls_context``: the key is the certificate's), so a machine the real
    image would refuse (exit 2) serves nothing here either."""
    given = {name: env[name] for name in FRONT_VARIABLES if name in env}
    if os.path.isdir("/dev/shm"):  # the entrypoint's default; tmp otherwise
        given["FLEET_SECRETS_DIR"] = "/dev/shm"
    try:
        settings = entrypoint.read_settings(given)
        entrypoint.sizing(int(ram_mb * 1024 * 1024))
        return entrypoint.tls_context(settings), None
    except entrypoint.Refusal as exc:
        return None, f"refusing to start: {exc}"


def true_proofs_per_hour(rate: float, spec: dict[str, Any]) -> float:
    """PoRep proofs per sim hour a serving machine proves that verify, kept
    busy: its capacity `rate`, bent by its behaviour `spec`."""
    mode = spec.get("mode", "honest")
    if mode in ("trickle", "bad"):
        return 0.0  # nothing answered, or nothing that verifies
    if mode == "slow":
        return rate / float(spec.get("slow_factor", Behaviour.slow_factor))
    return rate


def proof_seconds(rate: float, gpus: int) -> dict[str, float]:
    """Sim seconds one GPU worker takes per proof of each kind, so that
    `gpus` workers kept busy prove `rate` PoReps an hour ({} if it cannot)."""
    if rate <= 0 or gpus <= 0:
        return {}
    porep = gpus * 3600.0 / rate
    return {kind: porep * cost for kind, cost in RELATIVE_COST.items()}


@dataclass(frozen=True, slots=True)
class CuzkView:
    """What a router-mode machine's cuzk is doing now, for its host to serve."""

    state: State
    #: The prover process's start (a new value: cuzk restarted, connections drop).
    epoch: float | None
    #: No proof advances (frozen, offline or a stuck prover).
    paused: bool
    gpus: int
    proof_seconds: dict[str, float]
    srs_load_s: float
    spec: dict[str, Any]
    rev: int
    gpu_name: str
    vram_bytes: int


def cuzk_state(machine: Machine, refusal: str | None, blocker: str | None) -> State:
    """``up`` when the machine runs with its parameters fetched (cuzk
    started; nothing listens while the image loads or fetches), ``frozen``
    when it was up and is now paused or unreachable (calls hang), else
    ``down``: the image refused, the prover cannot run here, it failed, or
    the machine is stopped, rebooting, dead or destroyed."""
    m = machine
    if refusal or blocker or not m.starts_prover or m.destroyed_at is not None:
        return "down"
    started = m.phase in ("starting", "proving") and m.params_bytes >= PARAMS_BYTES
    if not started:
        return "down"
    if m.status == "running":
        return "up"
    if m.status == "frozen" or (m.status == "offline" and m.next_kind == "blip_end"):
        return "frozen"
    return "down"


def cuzk_view(
    machine: Machine,
    offer: dict[str, Any],
    *,
    rate: float,
    refusal: str | None,
    blocker: str | None,
    spec: dict[str, Any],
    rev: int,
) -> CuzkView:
    """The view of one machine (`rate`: its proofs/h, the capacity model's
    times its jitter; simulator/instances.py ``InstanceEnv.proof_rate``)."""
    state = cuzk_state(machine, refusal, blocker)
    gpus = int(offer.get("num_gpus") or 0)
    vram_mb = int(offer.get("gpu_ram") or _VRAM_MB_DEFAULT)
    return CuzkView(
        state=state,
        epoch=machine.prover_started_at,
        paused=state == "frozen" or machine.stuck,
        gpus=gpus,
        proof_seconds=proof_seconds(rate, gpus),
        srs_load_s=machine.fate.srs_load_s,
        spec=dict(spec),
        rev=rev,
        gpu_name=f"NVIDIA {offer.get('gpu_name') or 'GPU'}",
        vram_bytes=vram_mb * 1024 * 1024,
    )


def behaviour_spec(body: dict[str, Any]) -> dict[str, Any]:
    """A hostile host's cuzk behaviour from the control API's body, checked
    (ValueError says what is wrong): ``{"behaviour": MODE}`` with, for
    ``slow``, ``slow_factor`` (> 1, default 3); for ``dies``, ``after_proofs``
    (proofs finished before it dies half-way through the next, default 0);
    for ``trickle``, ``trickle_s`` (sim seconds each answer waits, default 5)."""
    mode = body.get("behaviour", "honest")
    if mode not in get_args(Mode):
        raise ValueError(f"behaviour must be one of {list(get_args(Mode))}")
    known = {"behaviour", "slow_factor", "after_proofs", "trickle_s"}
    unknown = sorted(set(body) - known)
    if unknown:
        raise ValueError(f"unknown fields {unknown}")
    spec: dict[str, Any] = {"mode": mode}
    if mode == "slow":
        spec["slow_factor"] = _number(body, "slow_factor", 3.0, low=1.0)
    elif mode == "dies":
        after = body.get("after_proofs", 0)
        if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= 10**6:
            raise ValueError("after_proofs takes an integer in 0-1000000")
        spec["after_proofs"] = after
    elif mode == "trickle":
        spec["trickle_s"] = _number(body, "trickle_s", 5.0, low=0.0)
    return spec


def _number(body: dict[str, Any], name: str, default: float, *, low: float) -> float:
    value = body.get(name, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not low < value <= 1e6
    ):
        raise ValueError(f"{name} takes a number in ({low:g}, 1e6]")
    return float(value)


def behaviour(spec: dict[str, Any], completed: int) -> Behaviour:
    """The stand-in's `Behaviour` for `spec`, on an engine that has finished
    `completed` proofs (a ``dies`` host counts its proofs from now)."""
    mode = cast(Mode, spec.get("mode", "honest"))
    return Behaviour(
        mode=mode,
        slow_factor=float(spec.get("slow_factor", Behaviour.slow_factor)),
        die_after_proofs=completed + int(spec.get("after_proofs", 0)) if mode == "dies" else None,
        trickle_s=float(spec.get("trickle_s", Behaviour.trickle_s)),
    )
