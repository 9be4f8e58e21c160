"""The fleet as operators see it: `fleet-agent fleet` and the web console.

Built from the store only, never from vast.ai: the monitor's last poll
(`fa_fleet_snapshots`, written by the poll activity, with the prover
measurements folded in) and the spend ledger. So it needs neither the
worker's vast.ai key nor a running worker, and says how old it is.
`build_fleet_view` is pure; `read_fleet_view` reads the store; rendering is
in starter/cli/fleet_render.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict, computed_field
from sqlalchemy.exc import SQLAlchemyError

from fleet_agent.fleet.snapshot import FleetInstance
from fleet_agent.fleet.spare import spare_shown
from fleet_agent.fleet.triage import NOT_PROVING, STUCK_LOADING_MINUTES, SUSPECT
from fleet_agent.models import SpendSummary
from fleet_agent.store import FleetSnapshots, Store, StoredSnapshot
from fleet_agent.store.spend_reads import SpendReads
from fleet_agent.vast.models import phase_of
from starter.agent_client import CliError
from starter.views.runlog import open_store

__all__ = [
    "STALE_AFTER",
    "Flag",
    "FleetRow",
    "FleetView",
    "build_fleet_view",
    "flags_of",
    "ledger_spend",
    "read_fleet_view",
    "stored_suspects",
]

#: A snapshot older than this is flagged: the monitor has missed many polls
#: (its default interval is 30 s), so the worker or the monitor is likely down.
STALE_AFTER = timedelta(minutes=5)


class Flag:
    """What an operator should notice about a machine (`FleetRow.flags`)."""

    FAILING = "failing"  # dead on vast.ai, or its prover errs / cannot be reached
    STUCK = "stuck"  # booting for longer than the agent waits
    LOADING = "loading"  # booting, or the prover starts up
    FETCHING = "fetching params"  # the prover downloads its parameters
    NOT_PROVING = "not proving"  # running, but no proofs for too long
    SUSPECT = "suspect"  # its prover claims more than twice the model: not believed
    STOPPED = "stopped"  # stopped or frozen: billed, no capacity
    UNKNOWN = "unknown state"
    # Its vast.ai row does not parse: billed, counted at the caps' limits.
    UNREADABLE = "row unreadable"
    TEMPORARY = "temporary"  # a bridge while slower rentals load; not cover for the target


class FleetRow(BaseModel):
    """One machine."""

    model_config = ConfigDict(frozen=True)

    id: int
    gpu: str
    num_gpus: int
    state: str
    # Counted now: measured where measured, else the capacity model's estimate.
    proofs_per_hour: float
    measured_proofs_per_hour: float | None
    expected_proofs_per_hour: float
    dph: float
    age_minutes: float | None
    machine_id: int | None
    host_id: int | None
    prover: str
    flags: list[str]
    note: str


class FleetView(BaseModel):
    """The fleet of one agent with its totals and spend, as of the monitor's last poll."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    # When the monitor took the snapshot (None: it has not polled yet).
    as_of: datetime | None
    age_seconds: float | None
    stale: bool
    # Why the monitor's last poll could not list the fleet ("" when it could).
    error: str
    rows: list[FleetRow]
    target_proofs_per_hour: float
    # The level the agent holds (a spare for one failure); None: the target.
    hold_proofs_per_hour: float | None = None
    capacity_proofs_per_hour: float
    expected_proofs_per_hour: float
    measured_proofs_per_hour: float
    fleet_dph: float
    spend: SpendSummary | None

    @property
    def holding(self) -> float | None:
        """The level held when a spare raises it above the target, else None."""
        return spare_shown(self.hold_proofs_per_hour, self.target_proofs_per_hour)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def gap_proofs_per_hour(self) -> float:
        """Capacity still missing (negative: a surplus)."""
        return round(self.target_proofs_per_hour - self.capacity_proofs_per_hour, 1)


def flags_of(inst: FleetInstance) -> list[str]:
    """The flags of one machine of a snapshot, most urgent first; a temporary
    machine's mark last."""
    flags = _health_flags(inst)
    return [*flags, Flag.TEMPORARY] if inst.temporary else flags


def _health_flags(inst: FleetInstance) -> list[str]:
    if inst.unreadable:
        return [Flag.UNREADABLE]
    if inst.state == SUSPECT:
        return [Flag.SUSPECT]
    if inst.state == NOT_PROVING:
        return [Flag.NOT_PROVING]
    phase = phase_of(inst.state)
    if phase == "dead":
        return [Flag.FAILING]
    if phase == "idle":
        return [Flag.STOPPED]
    if phase == "unrecognized":
        return [Flag.UNKNOWN]
    if phase == "booting":
        age = inst.age_minutes or 0.0
        # The snapshot's own limit (the host's link); older snapshots lack it.
        limit = inst.loading_limit_minutes or STUCK_LOADING_MINUTES
        stuck = inst.state != "rebooting" and age > limit
        return [Flag.STUCK, Flag.LOADING] if stuck else [Flag.LOADING]
    prover_phase = inst.prover.split(":", 1)[0].strip()
    return {
        "fetching_params": [Flag.FETCHING],
        "starting": [Flag.LOADING],
        "error": [Flag.FAILING],
        "unreachable": [Flag.FAILING],
    }.get(prover_phase, [])


def _row(inst: FleetInstance) -> FleetRow:
    return FleetRow(
        id=inst.id,
        gpu=inst.gpu,
        num_gpus=inst.num_gpus,
        state=inst.state,
        proofs_per_hour=inst.proofs_per_hour,
        measured_proofs_per_hour=inst.measured_proofs_per_hour,
        expected_proofs_per_hour=inst.expected_proofs_per_hour,
        dph=inst.dph,
        age_minutes=inst.age_minutes,
        machine_id=inst.machine_id,
        host_id=inst.host_id,
        prover=inst.prover,
        flags=flags_of(inst),
        note=inst.note,
    )


def build_fleet_view(
    agent_id: str, stored: StoredSnapshot | None, spend: SpendSummary | None, now: datetime
) -> FleetView:
    """The view of `stored` (None: no poll yet) and the ledger's `spend` at `now`. Pure."""
    if stored is None:
        return FleetView(
            agent_id=agent_id,
            as_of=None,
            age_seconds=None,
            stale=False,
            error="",
            rows=[],
            target_proofs_per_hour=0.0,
            capacity_proofs_per_hour=0.0,
            expected_proofs_per_hour=0.0,
            measured_proofs_per_hour=0.0,
            fleet_dph=0.0,
            spend=spend,
        )
    snap = stored.snapshot
    age = max(0.0, (now - stored.taken_at).total_seconds())
    return FleetView(
        agent_id=agent_id,
        as_of=stored.taken_at,
        age_seconds=round(age, 1),
        stale=age > STALE_AFTER.total_seconds(),
        error=snap.error,
        rows=[_row(i) for i in snap.instances],
        target_proofs_per_hour=snap.target_proofs_per_hour,
        hold_proofs_per_hour=snap.hold_proofs_per_hour,
        capacity_proofs_per_hour=snap.capacity_proofs_per_hour,
        expected_proofs_per_hour=snap.expected_proofs_per_hour,
        measured_proofs_per_hour=round(
            sum(i.measured_proofs_per_hour or 0.0 for i in snap.instances), 1
        ),
        fleet_dph=snap.fleet_dph,
        spend=spend,
    )


def read_fleet_view(store: Store, agent_id: str, now: datetime | None = None) -> FleetView:
    """The view from the store: the latest snapshot and the spend ledger.
    Reads only (synchronous). Raises `CliError` when the store cannot be read."""
    now = now or datetime.now(UTC)
    try:
        stored = FleetSnapshots(store).latest(agent_id)
        spend = SpendReads(store).summary(agent_id, now)
    except SQLAlchemyError as exc:
        first = str(exc).splitlines()[0]
        raise CliError(
            f"cannot read the fleet from the run log ({store!r}): {first} "
            "(a worker of this version adds the fleet table when it starts)"
        ) from None
    return build_fleet_view(agent_id, stored, spend, now)


def ledger_spend(agent_id: str, now: datetime | None = None) -> SpendSummary | None:
    """The agent's spend as of `now`, from the ledger (accrued to the monitor's
    latest poll, and by every tool that rents or releases): what `status` and
    the console show, fresher than the status query's figure, which is as of
    the last run's start. None when the run log cannot be read or holds no
    machine of the agent (a CLI far from the worker's store): the query's
    figure stands in. Reads only (synchronous)."""
    now = now or datetime.now(UTC)
    try:
        store = open_store()
    except CliError:
        return None
    try:
        spend = SpendReads(store).summary(agent_id, now)
    except SQLAlchemyError:
        return None
    finally:
        store.dispose()
    return spend if spend.accrued_until is not None else None


def stored_suspects(agent_id: str) -> list[FleetInstance]:
    """The machines the monitor's latest snapshot holds suspect (their prover
    claims more than the capacity model allows: fleet_agent/fleet/provers.py),
    for `status`; empty when there are none or the run log cannot be read.
    Reads only (synchronous)."""
    try:
        store = open_store()
    except CliError:
        return []
    try:
        stored = FleetSnapshots(store).latest(agent_id)
    except SQLAlchemyError:
        return []
    finally:
        store.dispose()
    if stored is None:
        return []
    return [i for i in stored.snapshot.instances if i.state == SUSPECT]
