"""Which machines of a fleet are capacity, and which go: dead, stopped, stuck,
not proving or suspect ones are destroyed and replaced (`triage`); the level the rest
holds (`hold_of`, spare.py). The first step of the autopilot's policy
(policy.py), and what the snapshot (snapshot.py) and the fleet view show.
Pure functions over snapshot rows."""

from __future__ import annotations

from typing import Any

from fleet_agent.fleet.load_time import STUCK_LOADING_MAX_MINUTES
from fleet_agent.fleet.spare import hold_level
from fleet_agent.vast.models import phase_of

__all__ = [
    "GRACE_STATES",
    "NOT_PROVING",
    "STUCK_LOADING_MINUTES",
    "SUSPECT",
    "hold_of",
    "hold_of_alive",
    "in_grace",
    "triage",
]

# A machine still not running after its row's `loading_limit_minutes` (its
# link and the image's size, fleet_agent/fleet/load_time.py), or this long
# when the row does not say, is replaced: vast.ai hosts sometimes never finish
# pulling the image. Age counts from the rental, so a reboot (transient, and
# possibly hours after the rental) is exempt.
STUCK_LOADING_MINUTES = STUCK_LOADING_MAX_MINUTES
#: The snapshot's state of a running machine whose prover makes no progress.
NOT_PROVING = "not_proving"
#: The snapshot's state of a running machine whose prover claims a rate past
#: belief (fleet_agent/fleet/provers.py, `SUSPECT_FACTOR`): no capacity, replaced.
SUSPECT = "suspect"
#: States in which vast.ai has lost contact with the host, which often comes
#: back within minutes: waited out for the agent's `offline_grace_minutes`.
#: ``exited`` (the container died) is not among them.
GRACE_STATES = frozenset({"offline", "unknown"})


def in_grace(state: str, down_since: float | None, now: float | None, grace_minutes: float) -> bool:
    """Whether a machine in `state` since `down_since` is still waited out at
    `now` (reader's clock): an offline or unknown spell shorter than the grace."""
    if state not in GRACE_STATES or down_since is None or now is None:
        return False
    return now - down_since < grace_minutes * 60


def triage(rows: list[dict[str, Any]]) -> tuple[list[tuple[int, str]], list[dict[str, Any]]]:
    """The machines to destroy (id, reason) — dead, stopped, stuck, not
    proving, suspect — and the rest that are or will be capacity."""
    destroy: list[tuple[int, str]] = []
    alive: list[dict[str, Any]] = []
    for row in rows:
        state = str(row.get("state"))
        phase = phase_of(state)
        age = row.get("age_minutes")
        if row.get("draining"):
            continue  # on its way out (drain.py): neither capacity nor to destroy
        if row.get("in_grace"):
            alive.append(row)  # offline or unknown for less than the grace: waited out
        elif state in (NOT_PROVING, SUSPECT):
            why = str(row.get("note") or "its prover made no progress")
            destroy.append((int(row["id"]), why))
        elif phase == "dead":
            destroy.append((int(row["id"]), f"instance is {state}; replacing it"))
        elif phase == "idle":
            # Stopped or frozen: proves nothing, still billed.
            destroy.append((int(row["id"]), f"instance is {state}, not capacity; replacing it"))
        elif phase in ("gone", "unrecognized"):
            # Not in the fleet, or a status this code does not know: not counted
            # as capacity, and not destroyed on a guess.
            continue
        elif (
            phase == "booting"
            and state != "rebooting"
            and age is not None
            and float(age) > float(row.get("loading_limit_minutes") or STUCK_LOADING_MINUTES)
        ):
            destroy.append((int(row["id"]), f"stuck {state} for {float(age):.0f} min"))
        else:
            alive.append(row)
    return destroy, alive


def hold_of_alive(alive: list[dict[str, Any]], target: float, *, spare: bool) -> float:
    """The level held for the machines that are or will be capacity (spare.py)."""
    rates = (float(r.get("expected_proofs_per_hour") or 0.0) for r in alive)
    return hold_level(target, rates, spare=spare)


def hold_of(rows: list[dict[str, Any]], target: float, *, spare: bool) -> float:
    """The level `plan_fleet` holds for these snapshot rows (spare.py)."""
    return hold_of_alive(triage(rows)[1], target, spare=spare)
