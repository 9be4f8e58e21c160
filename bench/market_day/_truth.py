"""The market day's truth: its schedule and the agent's config, each machine's
life as the simulator saw it, step by step, and why each machine went
(bench/market_day/day.py). No Temporal, no vast.ai client: plain records.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from typing import Any

from fleet_agent.fleet.labels import create_label, parse_label
from fleet_agent.fleet.temporary import temporary_labels
from fleet_agent.store import Store, ToolJournal

__all__ = [
    "BAND",
    "CONFIG",
    "DAY_TARGETS",
    "SETTLE_S",
    "TARGETS",
    "THRASH_MINUTES",
    "Day",
    "Life",
    "destroyed_as",
    "failed",
    "in_band",
    "mark_creates",
    "observe",
    "parse_targets",
    "run_counts",
    "target_at",
]

#: (hour, target proofs/h): the operator's changes during the day.
DAY_TARGETS = ((0, 500.0), (6, 800.0), (12, 300.0), (18, 500.0))


def parse_schedule(
    text: str, name: str, form: str = "HOUR:VALUE"
) -> tuple[tuple[float, float], ...]:
    """A schedule "HOUR:VALUE,..." with hours rising from 0; ValueError
    naming `name` and what is wrong (`form`: how a pair is written)."""
    pairs: list[tuple[float, float]] = []
    for part in text.split(","):
        hour, sep, value = part.strip().partition(":")
        try:
            if not sep:
                raise ValueError
            pairs.append((float(hour), float(value)))
        except ValueError:
            raise ValueError(f"{name}: {part.strip()!r} is not {form}") from None
    hours = [h for h, _ in pairs]
    if hours[0] != 0 or any(b <= a for a, b in itertools.pairwise(hours)):
        raise ValueError(f"{name}: hours must start at 0 and rise")
    return tuple(pairs)


def parse_targets(text: str) -> tuple[tuple[float, float], ...]:
    """A schedule "HOUR:TARGET,..." (hours rising from 0, targets above 0),
    as MARKET_DAY_TARGETS gives it; ValueError with what is wrong."""
    pairs = parse_schedule(text, "MARKET_DAY_TARGETS", "HOUR:TARGET")
    if any(t <= 0 for _, t in pairs):
        raise ValueError("MARKET_DAY_TARGETS: every target must be above 0")
    return pairs


#: The schedule the bench runs: the day's, or a shorter one from
#: MARKET_DAY_TARGETS (e.g. "0:500,1.5:800,3:300,4:500" with --hours 5, the
#: changes of a day in five hours, for measuring what happens after a change
#: on many markets in the time of a few days).


def _schedule() -> tuple[tuple[float, float], ...]:
    """The day's schedule, or MARKET_DAY_TARGETS'; a bad one stops the bench
    with what is wrong (an exit, not a traceback)."""
    text = os.environ.get("MARKET_DAY_TARGETS")
    if not text:
        return DAY_TARGETS
    try:
        return parse_targets(text)
    except ValueError as e:
        raise SystemExit(str(e)) from None


TARGETS = _schedule()
CONFIG = {
    "max_instances": 60,
    "max_fleet_dph": 60.0,
    "max_instance_dph": 3.0,
    "monitor_poll_seconds": 60,
    "heartbeat_seconds": 300,
}
BAND = 0.05  # ±5 % of target
SETTLE_S = 3600.0  # after a start or a target change
# How often the oracle is taken again within a period (Day.market).
ORACLE_EVERY_S = 1800
THRASH_MINUTES = 20.0


@dataclass
class Life:
    """One machine as the simulator saw it."""

    created: float
    failed_at: float | None = None  # prover error/stuck or dead status first seen
    failure: str = ""  # what failed: the status, "prover error" or "prover stuck"
    proving_at: float | None = None  # its prover first seen proving
    why: str = ""  # the reason the destroy gave
    boot: str = "run"  # the simulator's draw: run, stuck (hangs loading) or boot_fail
    destroyed_at: float | None = None
    healthy_at_destroy: bool = True
    last: str = ""  # the last state seen before it went
    rate: float = 0.0  # the last proofs/h the simulator gave it while it proved
    dph: float = 0.0  # its price, $/h (dph_total)
    true_rate: float = 0.0  # what it proves while healthy (the simulator's truth)
    label: str = ""  # its vast.ai label
    temporary: bool = False  # rented as a bridge (the agent's journal says so)
    reason: str = ""  # the create's reason, as the agent's journal has it
    # The simulator's own clock at the rental and at the destroy (its row's
    # start_date and destroyed_at): a machine's life to the second, where
    # `created` and `destroyed_at` are the samples (every --step) that first
    # saw it and saw it gone, off by up to a step each.
    rented_s: float | None = None
    gone_s: float | None = None
    machine_id: int | None = None
    # Proofs it finished (the simulator's truth, last seen).
    done: int = 0

    def lifetime_s(self) -> float | None:
        """Seconds from rental to destroy: on the simulator's clock where
        both ends were seen, else between the samples; None while it lives."""
        if self.rented_s is not None and self.gone_s is not None:
            return self.gone_s - self.rented_s
        if self.destroyed_at is None:
            return None
        return self.destroyed_at - self.created


@dataclass
class Day:
    samples: list[tuple[float, float, float, float]] = field(default_factory=list)
    lives: dict[int, Life] = field(default_factory=dict)
    oracle: list[dict[str, Any]] = field(default_factory=list)
    # The oracle again every ORACLE_EVERY_S, at the changes too: the
    # market's cheapest fleet moves within a period (offers are rented away
    # by others in 2 h on the mean, docs/SIMULATOR.md).
    market: list[dict[str, Any]] = field(default_factory=list)

    def step(self) -> float:
        """Seconds between samples (0 with fewer than two)."""
        return self.samples[1][0] - self.samples[0][0] if len(self.samples) > 1 else 0.0


def in_band(target: float, capacity: float) -> bool:
    """Whether `capacity` is within ±BAND of `target`."""
    return abs(capacity - target) <= BAND * target


def target_at(hour: float) -> float:
    return [t for h, t in TARGETS if h <= hour][-1]


def failed(row: dict[str, Any]) -> bool:
    return bool(failure_of(row))


def failure_of(row: dict[str, Any]) -> str:
    """What the simulator's truth says failed on this machine, or ""."""
    status = row.get("actual_status")
    if status in ("exited", "offline", "unknown"):
        return str(status)
    if row.get("prover_error"):
        return "prover error"
    if row.get("prover_stuck"):
        return "prover stuck"
    return ""


def observe(day: Day, state: dict[str, Any], t: float) -> None:
    seen = set()
    for row in state["instances"]:
        iid = int(row["id"])
        seen.add(iid)
        life = day.lives.setdefault(iid, Life(created=t))
        if life.rented_s is None and row.get("start_date") is not None:
            life.rented_s = float(row["start_date"])
        if row.get("destroyed_at") is not None or row.get("cur_state") == "unloaded":
            if life.destroyed_at is None:
                life.destroyed_at = t
                life.healthy_at_destroy = life.failed_at is None
            if life.gone_s is None and row.get("destroyed_at") is not None:
                life.gone_s = float(row["destroyed_at"])
        else:
            life.last = (
                f"{row.get('actual_status')}/{row.get('prover_phase')} "
                f"start_date={row.get('start_date')} {str(row.get('status_msg') or '')[:60]}"
            )
            life.boot = str(row.get("boot_outcome") or "run")
            life.label = str(row.get("label") or "")
            life.dph = float(row.get("dph_total") or 0.0)
            life.true_rate = float(row.get("expected_proofs_per_hour") or 0.0)
            life.machine_id = int(row["machine_id"]) if row.get("machine_id") else None
            life.done = max(life.done, int(row.get("proofs_completed") or 0))
            if float(row.get("proofs_per_hour") or 0.0) > 0:
                life.rate = float(row["proofs_per_hour"])
            if life.proving_at is None and row.get("prover_phase") == "proving":
                life.proving_at = t
            if life.failed_at is None and failed(row):
                life.failed_at = t
                life.failure = failure_of(row)
    for iid, life in day.lives.items():
        if iid not in seen and life.destroyed_at is None:
            life.destroyed_at = t
            life.healthy_at_destroy = life.failed_at is None


_DESTROYED = re.compile(
    r"Destroyed instance (\d+) \(.*?, was (\w+)\)\. Reason given: ([^\n|]{0,80})"
)


def destroyed_as(day: Day, store: Store, agent_id: str) -> None:
    """A machine that died between two samples looks healthy in them: the
    destroy tool's result says what vast.ai listed it as when it went, and
    the reason given says when its prover reported an error."""
    for run in store.run_reads.list_runs(agent_id, limit=100_000):
        for iid, was, why in _DESTROYED.findall(run.actions_digest or ""):
            life = day.lives.get(int(iid))
            if life is not None:
                life.why = why
            # ... and a prover that reported an error between two samples
            # (its own status, read by the monitor) is gone by the next one.
            gone_as = (
                f"went {was} between samples"
                if was in ("exited", "offline", "unknown")
                else "prover error between samples"
                if "(prover error:" in why
                else ""
            )
            if life is not None and gone_as:
                life.healthy_at_destroy = False
                life.failed_at = life.failed_at if life.failed_at is not None else life.destroyed_at
                life.failure = life.failure or gone_as


def mark_creates(day: Day, store: Store, agent_id: str) -> None:
    """What the agent rented each machine for, as its tool journal records
    the creates: temporary bridges (fleet_agent/fleet/temporary.py) and each
    create's reason (a swap, a trade, a cover)."""
    runs = {p.run for p in (parse_label(life.label) for life in day.lives.values()) if p}
    calls = ToolJournal(store).creates(agent_id, runs)
    labels = temporary_labels(agent_id, calls)
    reasons = {create_label(agent_id, run, use_id): args for run, use_id, args in calls}
    for life in day.lives.values():
        life.temporary = bool(life.label) and life.label in labels
        life.reason = str(reasons.get(life.label, {}).get("reason") or "")


def run_counts(store: Store, agent_id: str) -> dict[str, Any]:
    """The agent's runs over the day (attempts of one run once), and how many
    took each kind of trigger: a run woken by its own schedule_next_check
    (the bridges' 2-minute checks) counts under `wake`."""
    runs = {r.run: r for r in store.run_reads.list_runs(agent_id, limit=100_000)}
    kinds: dict[str, int] = {}
    for record in runs.values():
        for kind in {str(t.kind) for t in record.triggers}:
            kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "runs": len(runs),
        "runs_woken": kinds.get("wake", 0),
        "runs_by_trigger": dict(sorted(kinds.items())),
    }
