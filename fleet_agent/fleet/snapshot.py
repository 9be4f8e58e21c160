"""A compact picture of the fleet for the model, the monitor and the CLI.

States are `Instance.state` words (fleet_agent/vast/models.py): running
machines are capacity, booting ones (scheduling, loading, rebooting) will be;
stopped and frozen machines are not, and are billed until they are destroyed,
like dead ones, so the model is told to replace or release them. Destroyed
rows are no fleet members and are left out. A running machine whose prover
made no progress for a while is "not_proving" (fleet_agent/fleet/provers.py):
not capacity, to be replaced; so is one whose prover claims a rate past
belief, "suspect" (provers.py, `SUSPECT_FACTOR`), and its figure is not shown
as measured. A machine whose vast.ai row does not parse
(state `UNREADABLE`, fleet_agent/vast/parse.py) is not capacity either and
is not destroyed on a guess; it still bills, and every cap counts it at the
cap's value (fleet_agent/fleet/guardrails.py): its note and the summary line
say so.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from pydantic import Field

from fleet_agent.fleet.capacity import proofs_per_hour
from fleet_agent.fleet.load_time import DEFAULT_IMAGE_GB, stuck_loading_minutes
from fleet_agent.fleet.provers import ProverTrack, not_proving_reason
from fleet_agent.fleet.reconcile import duplicate_labels
from fleet_agent.fleet.spare import spare_shown
from fleet_agent.fleet.temporary import temporary_min_age
from fleet_agent.fleet.triage import GRACE_STATES, NOT_PROVING, SUSPECT, hold_of, in_grace
from fleet_agent.untrusted import fence
from fleet_agent.vast.models import UNREADABLE, Instance, phase_of
from fleet_agent.wire import Wire

#: The prover phase of a machine that proves, and the state word of the
#: monitor's one `state_changed` when a machine first does (workflows/monitor.py).
PROVING = "proving"

__all__ = [
    "NOT_PROVING",
    "PROVING",
    "SUSPECT",
    "FleetInstance",
    "FleetSnapshot",
    "estimate",
    "summarize",
]


class FleetInstance(Wire):
    id: int
    label: str
    state: str  # Instance.state: actual_status folded with intended/cur state
    gpu: str
    num_gpus: int
    dph: float
    # Proving now: measured where measured (see `measured_proofs_per_hour`),
    # else the capacity model's estimate while it proves unmeasured.
    proofs_per_hour: float
    # What it proves once running (0 for dead and not-proving machines): plan with this.
    expected_proofs_per_hour: float = 0.0
    # From the prover's own status (proofs finished over time); None until measured.
    measured_proofs_per_hour: float | None = None
    usd_per_100_proofs: float | None = None
    prover: str = ""  # the prover's phase and detail, as its status says
    status_msg: str = ""
    age_minutes: float | None = None
    # While it boots: how long it may load before it counts as stuck and is
    # replaced (fleet_agent/fleet/load_time.py: its link and the image's size).
    loading_limit_minutes: float | None = None
    # False for a healthy machine younger than min_release_age_minutes
    # (a temporary one: than temporary.TEMPORARY_MIN_AGE_MINUTES).
    releasable: bool = True
    # Rented as a bridge while slower rentals load (create_instance's
    # `temporary`, read from the agent's journal): not cover for the target.
    temporary: bool = False
    machine_id: int | None = None
    host_id: int | None = None
    # Offline or unknown for `down_minutes`, less than the agent's
    # offline_grace_minutes: waited out, not replaced (triage.py, `in_grace`).
    down_minutes: float | None = None
    in_grace: bool = False
    # Being released: it takes no new work and is destroyed once its work in
    # flight is done (fleet_agent/fleet/drain.py). Not capacity.
    draining: bool = False
    # Its vast.ai row does not parse: state, price and hardware unknown,
    # counted at the caps' values (the note says why it did not parse).
    unreadable: bool = False
    # Set for a machine that is not capacity: stopped, frozen, dead, or in a
    # status this code does not know.
    note: str = ""

    def proves(self) -> bool:
        """Running, and its prover says it proves (read from its status port;
        never while statuses are not read): what the monitor signals once per
        machine as the state "proving"."""
        return self.state == "running" and self.prover.partition(":")[0] == PROVING

    def change_detail(self) -> str:
        """What a state change of this machine tells the agent: why it is not
        proving or is suspect (its host's words fenced already), else vast.ai's
        status message, fenced (fleet_agent/untrusted.py)."""
        if self.state in _OURS:
            return self.note
        return fence(self.status_msg) if self.status_msg else ""

    def for_model(self) -> dict[str, object]:
        """The row as the model reads it: what a host or vast.ai wrote fenced
        (fleet_agent/untrusted.py), defaults left out."""
        row = self.model_dump(exclude_defaults=True)
        for key in _HOST_FIELDS:
            if row.get(key):
                row[key] = fence(row[key])
        row["state"] = self.shown_state()
        return row

    def shown_state(self) -> str:
        """The state word as the model reads it: a status this code does not
        know is vast.ai's text as it came, fenced."""
        if self.unreadable:
            return UNREADABLE  # our word, not vast.ai's
        if self.state not in _OURS and phase_of(self.state) == "unrecognized":
            return fence(self.state, _STATE_CHARS)
        return self.state


#: FleetInstance fields a host or vast.ai writes: fenced in the model's view.
#: (`label` is ours: only machines whose label parses as this agent's are listed.)
_HOST_FIELDS = ("gpu", "prover", "status_msg")
_STATE_CHARS = 40
#: State words this code gives a running machine, not vast.ai's.
_OURS = frozenset({NOT_PROVING, SUSPECT})


class FleetSnapshot(Wire):
    """This agent's instances and the totals the model plans with."""

    instances: list[FleetInstance] = Field(default_factory=list)
    target_proofs_per_hour: float = 0.0
    capacity_proofs_per_hour: float = 0.0
    expected_proofs_per_hour: float = 0.0  # running + loading: capacity once loaded
    # The level to hold: the target, or more with a spare for one failure
    # (fleet_agent/fleet/spare.py). None in payloads older than the field.
    hold_proofs_per_hour: float | None = None
    fleet_dph: float = 0.0
    # Create labels carried by more than one machine (label → ids, oldest
    # first): a create attempt that landed twice. The monitor settles them with
    # the `reconcile_labels` activity.
    duplicate_labels: dict[str, list[int]] = Field(default_factory=dict)
    error: str = ""
    # Set by the monitor's poll only: whether the agent workflow still runs
    # (a describe through Temporal), None when Temporal could not say (and
    # in every other view, and in payloads older than the field).
    agent_open: bool | None = None

    def states(self) -> dict[int, str]:
        return {i.id: i.state for i in self.instances}

    def proving_ids(self) -> set[int]:
        return {i.id for i in self.instances if i.proves()}

    def to_text(self) -> str:
        """Model-friendly: one summary line, then a JSON list of instances."""
        if self.error:
            return f"Fleet status unavailable: {self.error}"
        counts = Counter(i.shown_state() for i in self.instances)
        by_state = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no instances"
        gap = self.target_proofs_per_hour - self.capacity_proofs_per_hour
        # One line, then the JSON rows: readers (the autopilot) rely on that shape.
        head = (
            f"{len(self.instances)} instances ({by_state}); capacity "
            f"{self.capacity_proofs_per_hour:.0f} proofs/h running, "
            f"{self.expected_proofs_per_hour:.0f} once loading ones are up; target "
            f"{self.target_proofs_per_hour:.0f} (gap {gap:+.0f}); spend ${self.fleet_dph:.2f}/h"
        )
        hold = spare_shown(self.hold_proofs_per_hour, self.target_proofs_per_hour)
        if hold is not None:
            head += (
                f"; hold {hold:.0f} proofs/h (the target plus a spare: losing any one "
                "machine of up to 8.5 % of the target then leaves the fleet within 5 % "
                "under it)"
            )
        idle = sum(
            1 for i in self.instances if i.state in _OURS or phase_of(i.state) in ("idle", "dead")
        )
        if idle:
            head += (
                f"; {idle} machine(s) are not capacity and never will be (see note), "
                "but are billed until destroyed: replace or release them"
            )
        unreadable = sum(1 for i in self.instances if i.unreadable)
        if unreadable:
            head += (
                f"; {unreadable} machine(s) whose vast.ai rows do not parse: still billed, "
                f"each counted at {UNREADABLE_COUNTED} (see note)"
            )
        if self.duplicate_labels:
            extra = sum(len(ids) - 1 for ids in self.duplicate_labels.values())
            head += (
                f"; {extra} duplicate machine(s) of one create call (same label): the "
                "oldest of each label is kept and the others are being destroyed"
            )
        rows = [i.for_model() for i in self.instances]
        # Unescaped: the fences (fleet_agent/untrusted.py) read as « and », not \u00ab.
        text = json.dumps(rows, separators=(",", ":"), ensure_ascii=False)
        return f"{head}\n```json\n{text}\n```"


#: How every cap counts a machine whose row does not parse (guardrails.py).
UNREADABLE_COUNTED = (
    "the caps' limits (one instance, max_instance_dph $/h, downloads at "
    "max_inet_down_cost_per_tb, in max_fleet_dph and the daily budget)"
)

_NOTES = {
    "idle": "{state}: not proving, still billed; destroy it and rent a replacement if needed",
    "dead": "{state}: dead for good, still billed until destroyed; replace it",
    "unrecognized": "unrecognized status {state}: not counted as capacity",
}


def estimate(inst: Instance) -> float:
    """What the capacity model expects of this machine once it proves: its GPUs,
    host RAM and CPU cores (the real service reports no throughput)."""
    return proofs_per_hour(
        inst.gpu_name or "", inst.num_gpus or 1, inst.ram_mb, inst.cpu_cores_effective
    )


@dataclass(frozen=True)
class _Capacity:
    now: float  # proving now: measured, else the estimate while proving unmeasured
    expected: float  # once loaded: plan with this
    measured: float | None = None
    prover: str = ""
    not_proving: str = ""  # why a running machine counts as not proving
    suspect: str = ""  # why its measured rate is not believed (provers.py)


def _capacity(
    inst: Instance, track: ProverTrack | None, reading: bool, now: float | None, limit: float
) -> _Capacity:
    """Capacity is measured where a measurement exists; the estimate counts only
    while a machine boots, fetches or loads its parameters, or proves unmeasured."""
    guess = estimate(inst)
    if inst.phase == "booting":
        return _Capacity(0.0, guess)
    if inst.phase != "running":
        return _Capacity(0.0, 0.0)
    if not reading or track is None or now is None:
        # Status not read (disabled, or not yet polled): the model's estimate.
        return _Capacity(guess, guess)
    prover = f"{track.phase}: {track.detail}" if track.detail else track.phase
    if track.suspect:
        return _Capacity(0.0, 0.0, None, prover[:120], suspect=track.suspect)
    reason = not_proving_reason(track, now, limit, guess)
    if reason is not None:
        return _Capacity(0.0, 0.0, track.measured_proofs_per_hour, prover[:120], reason)
    measured = track.measured_proofs_per_hour
    if measured is not None:
        return _Capacity(measured, measured, measured, prover[:120])
    if track.phase == "proving":
        return _Capacity(guess, guess, None, prover[:120])
    return _Capacity(0.0, guess, None, prover[:120])


def summarize(
    instances: list[Instance],
    *,
    target: float,
    now_epoch: float | None = None,
    tracks: dict[int, ProverTrack] | None = None,
    not_proving_minutes: float = 20.0,
    offline_grace_minutes: float = 0.0,
    down_since: Mapping[int, float] | None = None,
    min_release_age_minutes: float = 0.0,
    image_gb: float = DEFAULT_IMAGE_GB,
    spare: bool = False,
    temporary: Collection[str] = (),
) -> FleetSnapshot:
    """The snapshot of `instances`. `tracks` are the monitor's prover reads (None:
    statuses are not read, capacity is the estimate); a running machine whose
    prover made no progress for `not_proving_minutes` is in state "not_proving".
    A healthy machine younger than `min_release_age_minutes` is not releasable;
    one still loading after its `loading_limit_minutes` (its link and the
    image's `image_gb`) is stuck. `hold_proofs_per_hour` is the level the
    fleet holds, with a spare for one failure if `spare` (spare.py).
    `temporary`: the labels of the machines rented as temporary (temporary.py);
    such a machine is releasable from `temporary_min_age`. A machine offline
    or unknown since `down_since` (by id, reader's clock) for less than
    `offline_grace_minutes` is waited out: no capacity now, its estimate
    once back, and `in_grace`."""
    rows: list[FleetInstance] = []
    capacity = expected = dph = 0.0
    members = [i for i in instances if not i.is_gone]
    for inst in sorted(members, key=lambda i: i.id):
        state, phase = inst.state, inst.phase
        track = (tracks or {}).get(inst.id)
        cap = _capacity(inst, track, tracks is not None, now_epoch, not_proving_minutes)
        age = None
        if now_epoch is not None and inst.start_date:
            age = round((now_epoch - inst.start_date) / 60, 1)
        # An unrecognized status is vast.ai's text as it came: fenced in the note.
        word = fence(state, _STATE_CHARS) if phase == "unrecognized" else state
        note = _NOTES[phase].format(state=word) if phase in _NOTES else ""
        since = (down_since or {}).get(inst.id)
        grace = in_grace(state, since, now_epoch, offline_grace_minutes)
        down = (
            round((now_epoch - since) / 60, 1)
            if since is not None and now_epoch is not None and state in GRACE_STATES
            else None
        )
        if grace:
            cap = _Capacity(0.0, estimate(inst))
            note = (
                f"{state} for {down or 0:.0f} min: waited out up to "
                f"{offline_grace_minutes:g} min (offline_grace_minutes), then replaced"
            )
        draining = track is not None and track.draining_since is not None
        if draining:
            # A suspect that drains goes at the monitor's next poll (drain.py).
            cap = _Capacity(0.0, 0.0, cap.measured, cap.prover, suspect=cap.suspect)
            note = "draining: destroyed once its work in flight is done; not capacity"
        if cap.not_proving:
            state = NOT_PROVING
            note = f"running but not proving ({cap.not_proving}); still billed: replace it"
        if inst.unreadable is not None:
            note = (
                f"its vast.ai row does not parse ({fence(inst.unreadable, 120)}): state, "
                f"price and hardware unknown, not capacity; still billed, so counted at "
                f"{UNREADABLE_COUNTED} until it parses again or is destroyed"
            )
            if not inst.has_id:
                note += (
                    "; the row has no usable id (this one is derived from its label): "
                    "only the operator can destroy it, in vast.ai's console"
                )
        if cap.suspect:
            state = SUSPECT
            note = (
                f"suspect: {cap.suspect}; the figure is not believed and it is no capacity; "
                "still billed: replace it (its host is not rented again)"
            )
        limit = (
            stuck_loading_minutes(inst.inet_down, image_gb)
            if phase == "booting" and state != "rebooting"
            else None
        )
        stuck = limit is not None and age is not None and age > limit
        healthy = (
            phase in ("running", "booting")
            and not cap.not_proving
            and not cap.suspect
            and not stuck
            and not draining
        )
        is_temporary = bool(inst.label) and inst.label in temporary
        min_age = (
            temporary_min_age(min_release_age_minutes) if is_temporary else min_release_age_minutes
        )
        # A minimum of 0 keeps nothing, even a machine whose start vast.ai
        # dates ahead of this clock (a negative age).
        young = age is not None and min_age > 0 and age < min_age
        rows.append(
            FleetInstance(
                id=inst.id,
                label=inst.label or "",
                state=state,
                gpu=inst.gpu_name or "?",
                num_gpus=inst.num_gpus or 1,
                dph=round(inst.dph_total or 0.0, 4),
                proofs_per_hour=round(cap.now, 1),
                expected_proofs_per_hour=round(cap.expected, 1),
                measured_proofs_per_hour=(
                    round(cap.measured, 1) if cap.measured is not None else None
                ),
                usd_per_100_proofs=(
                    round(100 * (inst.dph_total or 0.0) / cap.expected, 3) if cap.expected else None
                ),
                prover=cap.prover,
                status_msg=(inst.status_msg or "")[:120],
                age_minutes=age,
                loading_limit_minutes=round(limit, 1) if limit is not None else None,
                releasable=not (healthy and young),
                temporary=is_temporary,
                machine_id=inst.machine_id,
                host_id=inst.host_id,
                down_minutes=down,
                in_grace=grace,
                draining=draining,
                unreadable=inst.unreadable is not None,
                note=note,
            )
        )
        capacity += cap.now
        expected += cap.expected
        # Dead, stopped and frozen machines bill until destroyed, so they count.
        dph += inst.dph_total or 0.0
    hold = hold_of([r.model_dump() for r in rows], target, spare=spare)
    return FleetSnapshot(
        instances=rows,
        target_proofs_per_hour=target,
        hold_proofs_per_hour=round(hold, 1),
        capacity_proofs_per_hour=round(capacity, 1),
        expected_proofs_per_hour=round(expected, 1),
        fleet_dph=round(dph, 4),
        duplicate_labels=duplicate_labels(members),
    )
