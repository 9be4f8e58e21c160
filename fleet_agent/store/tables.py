"""SQLModel table definitions. Only the store module touches these classes.

Each table has a surrogate `id` primary key plus a unique constraint on its
natural key; the natural key is what makes retried writes idempotent
(`INSERT ... ON CONFLICT DO NOTHING` targets it).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Table, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from .tables_agent import AgentConfigRow
from .tables_demand import DEMAND_POINTS_TABLE, DemandPointRow
from .tables_fleet import FLEET_SNAPSHOTS_TABLE, PROOF_DAYS_TABLE, FleetSnapshotRow, ProofDayRow
from .tables_market import MARKET_POINTS_TABLE, MarketPointRow
from .tables_money import (
    RUN_COSTS_TABLE,
    RUN_SPEND_TABLE,
    SPEND_HOURS_TABLE,
    SPEND_INSTANCES_TABLE,
    RunCostRow,
    RunSpendRow,
    SpendHourRow,
    SpendInstanceRow,
)
from .tables_notify import NOTIFICATIONS_TABLE, NotificationRow
from .tables_router import RouterMemberRow, RouterQueueRow, RouterWitnessRow
from .timestamps import UTCDateTime

__all__ = [
    "DEMAND_POINTS_TABLE",
    "FAILED_HOSTS_TABLE",
    "FLEET_SNAPSHOTS_TABLE",
    "INBOX_TABLE",
    "MARKET_POINTS_TABLE",
    "MESSAGES_TABLE",
    "META_TABLE",
    "NOTIFICATIONS_TABLE",
    "PROOF_DAYS_TABLE",
    "PROVER_TRACKS_TABLE",
    "RUNS_TABLE",
    "RUN_COSTS_TABLE",
    "RUN_SPEND_TABLE",
    "SESSIONS_TABLE",
    "SPEND_HOURS_TABLE",
    "SPEND_INSTANCES_TABLE",
    "SUMMARIES_TABLE",
    "TOOL_CALLS_TABLE",
    "DemandPointRow",
    "FailedHostRow",
    "FleetSnapshotRow",
    "InboxRow",
    "MarketPointRow",
    "MessageRow",
    "MetaRow",
    "NotificationRow",
    "ProofDayRow",
    "ProverTrackRow",
    "RunCostRow",
    "RunRow",
    "RunSpendRow",
    "SessionRow",
    "SpendHourRow",
    "SpendInstanceRow",
    "SummaryRow",
    "ToolCallRow",
    "all_tables",
    "table_of",
]

SESSIONS_TABLE = "fa_sessions"
RUNS_TABLE = "fa_runs"
MESSAGES_TABLE = "fa_messages"
TOOL_CALLS_TABLE = "fa_tool_calls"
FAILED_HOSTS_TABLE = "fa_failed_hosts"
PROVER_TRACKS_TABLE = "fa_prover_tracks"
INBOX_TABLE = "fa_inbox"
META_TABLE = "fa_meta"
SUMMARIES_TABLE = "fa_summaries"


class MetaRow(SQLModel, table=True):
    """Facts about the store itself, e.g. its schema version (see schema.py)."""

    __tablename__ = META_TABLE

    key: str = Field(primary_key=True)
    value: str = Field(sa_type=Text)


class SessionRow(SQLModel, table=True):
    """One conversation of an agent; a reset starts a new session number."""

    __tablename__ = SESSIONS_TABLE
    __table_args__ = (UniqueConstraint("agent_id", "session", name="uq_fa_sessions_agent_session"),)

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    session: int
    started_at: datetime = Field(sa_type=UTCDateTime)
    reason: str = Field(default="", sa_type=Text)


class RunRow(SQLModel, table=True):
    """One attempt of an agent run: its triggers, outcome, counters and prompt bookkeeping.

    A run executes again after a `temporal workflow reset` to before it: each
    execution is an attempt (1 = the original), written by the run workflow
    whose Temporal run ID is `workflow_run_id` ("" when the writer did not say).
    """

    __tablename__ = RUNS_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "run", "attempt", name="uq_fa_runs_agent_run_attempt"),
        # prompt_history and list_runs(session=...) filter on exactly this.
        Index("ix_fa_runs_agent_session_run", "agent_id", "session", "run"),
        # The LLM cost of today and of the last 24 h (run_costs.py), read by every run.
        Index("ix_fa_runs_agent_started", "agent_id", "started_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    run: int
    attempt: int = 1
    workflow_run_id: str = ""
    session: int
    status: str  # a RunStatus value; plain text so new statuses need no migration
    triggers_json: str = Field(default="[]", sa_type=Text)
    trigger_block: str = Field(default="", sa_type=Text)
    started_at: datetime = Field(sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    verdict_action: bool | None = None
    verdict_state_changed: bool | None = None
    verdict_error: str = ""
    noop: bool = False
    in_prompt: bool = True
    error: str = Field(default="", sa_type=Text)
    final_text: str = Field(default="", sa_type=Text)
    actions_digest: str = Field(default="", sa_type=Text)
    mutating_calls: int = 0
    tool_calls: int = 0
    rounds: int = 0
    # Stop reason of each LLM round, comma-separated (`max_tokens`, `refusal`, …).
    stop_reasons: str = Field(default="", sa_type=Text)
    input_tokens: int = 0
    output_tokens: int = 0
    # Kept so TokenUsage round-trips whole; prompt caching makes these large.
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    # The part of the cache writes made with the 1-hour TTL (billed 2 × input,
    # not 1.25 ×); schema version 3. The server default fills the rows of
    # older stores when the column is added.
    cache_creation_1h_input_tokens: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    # The part of output_tokens spent thinking; schema version 6.
    thinking_tokens: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    llm_seconds: float = 0.0
    history_runs_included: int = 0
    history_runs_dropped: int = 0
    estimated_prompt_tokens: int = 0


class MessageRow(SQLModel, table=True):
    """One message of a run's conversation; `content` is opaque to the store."""

    __tablename__ = MESSAGES_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "run", "seq", name="uq_fa_messages_agent_run_seq"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    run: int
    seq: int
    round: int
    role: str  # 'user' | 'assistant'
    kind: str  # e.g. 'context', 'assistant', 'tool_results'
    content: str = Field(sa_type=Text)
    in_prompt: bool = False
    created_at: datetime = Field(sa_type=UTCDateTime)


class ToolCallRow(SQLModel, table=True):
    """One fleet tool call, keyed by the model's tool_use_id: the journal that
    makes a replayed call (after `temporal workflow reset`) return its first
    result instead of acting on the fleet again."""

    __tablename__ = TOOL_CALLS_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "tool_use_id", name="uq_fa_tool_calls_agent_tool_use"),
        # The views' look-up of a fleet's temporary creates (agent, name, runs):
        # at 100,000 rows an agent 20 ms without it on SQLite, 0.5 ms with
        # (PostgreSQL 28 / 1.1; bench/perf/journal_lookup.py). Schema 5.
        Index("ix_fa_tool_calls_agent_name_run", "agent_id", "name", "run"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    tool_use_id: str
    run: int
    round: int
    name: str
    input_json: str = Field(default="{}", sa_type=Text)
    status: str  # 'started' | 'done'
    result_json: str = Field(default="", sa_type=Text)  # a ToolResult once done
    # A create's price, $/h, held against the caps while it is in flight
    # (ToolJournal.creates_in_flight). Schema 7.
    reserved_dph: float | None = None
    started_at: datetime = Field(sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class InboxRow(SQLModel, table=True):
    """The full text of one operator message; the workflow carries only its key."""

    __tablename__ = INBOX_TABLE
    __table_args__ = (UniqueConstraint("agent_id", "key", name="uq_fa_inbox_agent_key"),)

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    key: str
    seq: int
    author: str = Field(sa_type=Text)
    text: str = Field(sa_type=Text)
    received_at: datetime = Field(sa_type=UTCDateTime)


class FailedHostRow(SQLModel, table=True):
    """A host whose machine failed for this agent: not rented again until `until`."""

    __tablename__ = FAILED_HOSTS_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "machine_id", name="uq_fa_failed_hosts_agent_machine"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    machine_id: int
    host_id: int | None = None
    reason: str = Field(default="", sa_type=Text)
    failed_at: datetime = Field(sa_type=UTCDateTime)
    until: datetime = Field(sa_type=UTCDateTime)


class ProverTrackRow(SQLModel, table=True):
    """What the monitor measured of one instance's prover (fleet_agent/fleet/provers.py),
    as JSON: rewritten at every poll, dropped when the instance is gone."""

    __tablename__ = PROVER_TRACKS_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "instance_id", name="uq_fa_prover_tracks_agent_instance"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    instance_id: int
    data: str = Field(sa_type=Text)
    updated_at: datetime = Field(sa_type=UTCDateTime)


class SummaryRow(SQLModel, table=True):
    """One version of a session's rolling summary: it covers the session's runs
    `first_run`..`upto_run`; `from_run`..`upto_run` are the runs this version
    folded in. Written by the run `made_by_run` (fleet_agent/llm/compaction.py)."""

    __tablename__ = SUMMARIES_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "session", "upto_run", name="uq_fa_summaries_agent_upto"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    session: int
    made_by_run: int
    first_run: int
    from_run: int
    upto_run: int
    body: str = Field(sa_type=Text)
    source: str  # 'llm' | 'digest'
    # Why the digest wrote it, when it did ("" for the model's summary).
    fallback_reason: str = Field(default="", sa_type=Text)
    tokens: int
    created_at: datetime = Field(sa_type=UTCDateTime)


def table_of(model: type[SQLModel]) -> Table:
    """The Core `Table` of a table model.

    sqlmodel does not declare `__table__` for type checkers, so look the table
    up in the shared metadata by name instead.
    """
    name = model.__tablename__
    if not isinstance(name, str):
        raise TypeError(f"{model.__name__} has no static table name")
    return model.metadata.tables[name]


def all_tables() -> list[Table]:
    """The store's tables only: other code may register tables in the same metadata."""
    return [
        table_of(MetaRow),
        table_of(SessionRow),
        table_of(RunRow),
        table_of(MessageRow),
        table_of(InboxRow),
        table_of(ToolCallRow),
        table_of(FailedHostRow),
        table_of(ProverTrackRow),
        table_of(SpendInstanceRow),
        table_of(SpendHourRow),
        table_of(RunSpendRow),
        table_of(RunCostRow),
        table_of(SummaryRow),
        table_of(FleetSnapshotRow),
        table_of(ProofDayRow),
        table_of(AgentConfigRow),
        table_of(NotificationRow),
        table_of(DemandPointRow),
        table_of(MarketPointRow),
        table_of(RouterMemberRow),
        table_of(RouterWitnessRow),
        table_of(RouterQueueRow),
    ]
