"""What the agent and the router tell each other (through the store).

The agent names the members: the machines the router may send proofs to,
and whether each is serving or draining (`MemberSpec`, written by the
agent's activities). The router is the witness: per machine, what it sent,
what came back and when, on its own clock (`MachineWitness`), and what
waits at the router for a machine (`RouterQueue`). The monitor reads these
instead of anything a host says about itself.

All of them derive from `Wire`: the router's figures enter workflows.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from fleet_agent.wire import Wire

__all__ = [
    "REJECTIONS_TO_REPLACE",
    "MachineWitness",
    "MemberSpec",
    "MemberWant",
    "RouterQueue",
    "WitnessPhase",
]

#: Answers of one machine Curio rejected (the same request sent again after
#: the router answered it) before the router stops sending it work and the
#: agent replaces it and bans its host. One could be Curio's own retry of a
#: task that failed after the proof arrived; two is a bad prover. The router
#: and the agent use the same number (docs/decisions/router-and-market.md).
REJECTIONS_TO_REPLACE = 2

#: What the agent wants of a machine: new work (``serve``), or none, its jobs
#: finished by ``drain_by`` (``drain``). A machine not named is not a member.
MemberWant = Literal["serve", "drain"]

#: What the router sees of a member:
#: ``joining``  its cuzk does not answer yet, or its circuit is not loaded;
#: ``serving``  it takes work;
#: ``draining`` it takes no new work and has jobs in flight;
#: ``drained``  it takes no new work and has none: it may be destroyed;
#: ``failing``  its recent jobs failed, were rejected or timed out: no new work.
#: ``dead``     it has not answered for `DEAD_AFTER_S`.
WitnessPhase = Literal["joining", "serving", "draining", "drained", "failing", "dead"]

_Count = Annotated[int, Field(ge=0)]
_Seconds = Annotated[float, Field(ge=0)]


class MemberSpec(Wire):
    """One machine the router may use, as the agent names it."""

    instance_id: Annotated[int, Field(ge=1)]
    #: The instance's label (fleet_agent/fleet/labels.py): its TLS name is made from it.
    label: Annotated[str, Field(min_length=1, max_length=200)]
    #: ``host:port`` of the machine's front (its public address and mapped port).
    address: Annotated[str, Field(min_length=3, max_length=300)]
    want: MemberWant = "serve"
    #: When a draining machine's jobs are taken back and sent elsewhere.
    drain_by: datetime | None = None
    #: GPUs rented (the vast.ai row's ``num_gpus``). The router counts at most
    #: these: a host's GetStatus may lower the count, never raise it.
    gpus: Annotated[int, Field(ge=1, le=64)] | None = None
    #: What the capacity model expects of the machine, proofs (PoRep C2) per
    #: hour over all its GPUs (fleet_agent.fleet.snapshot.estimate): the
    #: router's expected time per job on it, and so its attempt budget.
    expected_proofs_per_hour: Annotated[float, Field(gt=0, le=100_000)] | None = None


class MachineWitness(Wire):
    """What the router saw of one machine, by its own clock."""

    instance_id: Annotated[int, Field(ge=1)]
    phase: WitnessPhase
    #: Why it is not serving, for the operator (e.g. "3 jobs failed in a row").
    reason: Annotated[str, Field(max_length=500)] = ""
    since: datetime
    sent: _Count = 0
    done: _Count = 0
    failed: _Count = 0
    #: Proofs Curio sent again after this machine answered them: rejected.
    rejected: _Count = 0
    #: Jobs given back to the router unanswered (timeout, death, drain bound).
    lost: _Count = 0
    in_flight: _Count = 0
    #: Seconds this machine had at least one job in flight.
    busy_seconds: _Seconds = 0.0
    #: Proofs per busy hour, measured over the recent window (None: not yet).
    proofs_per_busy_hour: Annotated[float, Field(ge=0)] | None = None
    last_sent_at: datetime | None = None
    last_done_at: datetime | None = None
    #: The circuits its cuzk reports loaded (``porep-32g``, ...).
    circuits: list[Annotated[str, Field(max_length=64)]] = Field(
        default_factory=list, max_length=16
    )


class RouterQueue(Wire):
    """Work at the router that no machine has yet: part of the demand reading."""

    at: datetime
    #: Jobs waiting for a machine, by proof kind (``porep``, ``snap``, ...).
    pending: dict[Annotated[str, Field(max_length=32)], _Count] = Field(
        default_factory=dict, max_length=8
    )
    in_flight: _Count = 0
    #: Expected proving seconds of the waiting jobs (each kind at its own cost).
    pending_proving_seconds: _Seconds = 0.0
    #: Bytes of vanilla proofs the router holds (bounded by its budget).
    held_bytes: _Count = 0
    completed: _Count = 0
    failed: _Count = 0
