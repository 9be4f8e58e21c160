"""The money tables: the spend ledger (per instance, per hour), and what each
run changed in the fleet's $/h and cost in LLM usage. Split from tables.py by
purpose; tables.py re-exports them and lists them in `all_tables`.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from .timestamps import UTCDateTime

__all__ = [
    "RUN_COSTS_TABLE",
    "RUN_SPEND_TABLE",
    "SPEND_HOURS_TABLE",
    "SPEND_INSTANCES_TABLE",
    "RunCostRow",
    "RunSpendRow",
    "SpendHourRow",
    "SpendInstanceRow",
]

SPEND_INSTANCES_TABLE = "fa_spend_instances"
SPEND_HOURS_TABLE = "fa_spend_hours"
RUN_SPEND_TABLE = "fa_run_spend"
RUN_COSTS_TABLE = "fa_run_costs"


class SpendInstanceRow(SQLModel, table=True):
    """One machine of an agent in the spend ledger (fleet_agent/store/spend.py):
    billed from `started_at` up to `accrued_until` at the rates seen, until
    `ended_at`. `accrued_until` is the compare-and-set key of every accrual."""

    __tablename__ = SPEND_INSTANCES_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "instance_id", name="uq_fa_spend_instances_agent_instance"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    instance_id: int
    started_at: datetime = Field(sa_type=UTCDateTime)
    accrued_until: datetime = Field(sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # "" while open; "destroyed" (by our own tools, at a known time) or
    # "vanished" (no longer listed: closed when it was last seen).
    closed_by: str = ""
    dph: float = 0.0  # $/h billed at the last sight (storage only while stopped)
    dph_total: float = 0.0  # the row's dph_total at the last sight
    inet_down_billed: float = 0.0  # traffic counters at the last sight, KB
    inet_up_billed: float = 0.0
    usd: float = 0.0  # accrued so far, traffic included


class SpendHourRow(SQLModel, table=True):
    """What one machine cost in one UTC hour: $ and seconds billed."""

    __tablename__ = SPEND_HOURS_TABLE
    __table_args__ = (
        UniqueConstraint(
            "agent_id", "instance_id", "hour", name="uq_fa_spend_hours_agent_instance_hour"
        ),
        # The summaries read an agent's hours from a point in time on.
        Index("ix_fa_spend_hours_agent_hour", "agent_id", "hour"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    instance_id: int
    hour: datetime = Field(sa_type=UTCDateTime)
    usd: float = 0.0
    seconds: float = 0.0


class RunSpendRow(SQLModel, table=True):
    """The $/hour one attempt of a run added (create) and removed (destroy).

    Kept beside `fa_runs` rather than in it: a table only added needs no
    schema version (schema.py)."""

    __tablename__ = RUN_SPEND_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "run", "attempt", name="uq_fa_run_spend_agent_run_attempt"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    run: int
    attempt: int
    dph_added: float = 0.0
    dph_removed: float = 0.0


class RunCostRow(SQLModel, table=True):
    """What one attempt of a run cost: its LLM rounds priced, its tools' seconds.

    Beside `fa_runs` like `fa_run_spend`: a table only added needs no schema
    version. `cost_usd` prices every stored reply of the run (replies are
    shared by attempts, so the latest attempt's figure covers them all)."""

    __tablename__ = RUN_COSTS_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "run", "attempt", name="uq_fa_run_costs_agent_run_attempt"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    run: int
    attempt: int
    model: str = ""
    cost_usd: float = 0.0
    tool_seconds: float = 0.0
