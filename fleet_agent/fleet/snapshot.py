"""A compact picture of the fleet for the model, the monitor and the CLI.

States are `Instance.state` words (fleet_agent/vast/models.py): running
machines are capacity, booting ones (scheduling, loading, rebooting) will be;
stopped and frozen machines are not, and are billed until they are destroyed,
like dead ones, so the model is told to replace or release them. Destroyed
rows are no fleet members and are left out.
"""

from __future__ import annotations

import json
from collections import Counter

from pydantic import BaseModel, Field

from fleet_agent.capacity import proofs_per_hour
from fleet_agent.fleet.reconcile import duplicate_labels
from fleet_agent.vast.models import Instance, phase_of

__all__ = ["FleetInstance", "FleetSnapshot", "instance_capacity", "summarize"]


class FleetInstance(BaseModel):
    id: int
    label: str
    state: str  # Instance.state: actual_status folded with intended/cur state
    gpu: str
    num_gpus: int
    dph: float
    proofs_per_hour: float
    # What it proves once running (0 for dead machines): plan with this.
    expected_proofs_per_hour: float = 0.0
    status_msg: str = ""
    age_minutes: float | None = None
    # Set for a machine that is not capacity: stopped, frozen, dead, or in a
    # status this code does not know.
    note: str = ""


class FleetSnapshot(BaseModel):
    """This agent's instances and the totals the model plans with."""

    instances: list[FleetInstance] = Field(default_factory=list)
    target_proofs_per_hour: float = 0.0
    capacity_proofs_per_hour: float = 0.0
    expected_proofs_per_hour: float = 0.0  # running + loading: capacity once loaded
    fleet_dph: float = 0.0
    # Create labels carried by more than one machine (label → ids, oldest
    # first): a create attempt that landed twice. The monitor settles them with
    # the `reconcile_labels` activity.
    duplicate_labels: dict[str, list[int]] = Field(default_factory=dict)
    error: str = ""

    def states(self) -> dict[int, str]:
        return {i.id: i.state for i in self.instances}

    def to_text(self) -> str:
        """Model-friendly: one summary line, then a JSON list of instances."""
        if self.error:
            return f"Fleet status unavailable: {self.error}"
        counts = Counter(i.state for i in self.instances)
        by_state = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no instances"
        gap = self.target_proofs_per_hour - self.capacity_proofs_per_hour
        # One line, then the JSON rows: readers (the autopilot) rely on that shape.
        head = (
            f"{len(self.instances)} instances ({by_state}); capacity "
            f"{self.capacity_proofs_per_hour:.0f} proofs/h running, "
            f"{self.expected_proofs_per_hour:.0f} once loading ones are up; target "
            f"{self.target_proofs_per_hour:.0f} (gap {gap:+.0f}); spend ${self.fleet_dph:.2f}/h"
        )
        idle = sum(1 for i in self.instances if phase_of(i.state) in ("idle", "dead"))
        if idle:
            head += (
                f"; {idle} machine(s) are not capacity and never will be (see note), "
                "but are billed until destroyed: replace or release them"
            )
        if self.duplicate_labels:
            extra = sum(len(ids) - 1 for ids in self.duplicate_labels.values())
            head += (
                f"; {extra} duplicate machine(s) of one create call (same label): the "
                "oldest of each label is kept and the others are being destroyed"
            )
        rows = [i.model_dump(exclude_defaults=True) for i in self.instances]
        return f"{head}\n```json\n{json.dumps(rows, separators=(',', ':'))}\n```"


_NOTES = {
    "idle": "{state}: not proving, still billed; destroy it and rent a replacement if needed",
    "dead": "{state}: dead for good, still billed until destroyed; replace it",
    "unrecognized": "unrecognized status {state!r}: not counted as capacity",
}


def instance_capacity(inst: Instance) -> float:
    """Proofs/h of a running instance: reported (simulator) or estimated from
    its GPU and host RAM with the capacity model (the real service reports none)."""
    if inst.phase != "running":
        return 0.0
    if inst.proofs_per_hour is not None:
        return float(inst.proofs_per_hour)
    return proofs_per_hour(inst.gpu_name or "", inst.num_gpus or 1, inst.cpu_ram or 0.0)


def summarize(
    instances: list[Instance], *, target: float, now_epoch: float | None = None
) -> FleetSnapshot:
    rows: list[FleetInstance] = []
    capacity = expected = dph = 0.0
    members = [i for i in instances if not i.is_gone]
    for inst in sorted(members, key=lambda i: i.id):
        state, phase = inst.state, inst.phase
        cap = instance_capacity(inst)
        potential = (
            cap or proofs_per_hour(inst.gpu_name or "", inst.num_gpus or 1, inst.cpu_ram or 0.0)
            if phase in ("running", "booting")
            else 0.0
        )
        age = None
        if now_epoch is not None and inst.start_date:
            age = round((now_epoch - inst.start_date) / 60, 1)
        rows.append(
            FleetInstance(
                id=inst.id,
                label=inst.label or "",
                state=state,
                gpu=inst.gpu_name or "?",
                num_gpus=inst.num_gpus or 1,
                dph=round(inst.dph_total or 0.0, 4),
                proofs_per_hour=round(cap, 1),
                expected_proofs_per_hour=round(potential, 1),
                status_msg=(inst.status_msg or "")[:120],
                age_minutes=age,
                note=_NOTES[phase].format(state=state) if phase in _NOTES else "",
            )
        )
        capacity += cap
        expected += potential
        # Dead, stopped and frozen machines bill until destroyed, so they count.
        dph += inst.dph_total or 0.0
    return FleetSnapshot(
        instances=rows,
        target_proofs_per_hour=target,
        capacity_proofs_per_hour=round(capacity, 1),
        expected_proofs_per_hour=round(expected, 1),
        fleet_dph=round(dph, 4),
        duplicate_labels=duplicate_labels(members),
    )
