"""The router's tables: what the agent and the cuzk router tell each other
(fleet_agent/cuzk/witness.py, docs of the design: issue 52).

The agent's monitor writes the members (`fa_router_members`); the router
reads them every 2 s and writes, every 5 s, what it saw of each machine
(`fa_router_witness`) and what waits at it (`fa_router_queue`, one row per
agent). Each row holds its model as JSON; `want` is the member's want kept
beside it so a drain can be kept by one atomic statement
(fleet_agent/store/router.py). Split from tables.py by purpose; tables.py
lists them in `all_tables`. Only added tables: no schema version (schema.py).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from .timestamps import UTCDateTime

__all__ = [
    "ROUTER_MEMBERS_TABLE",
    "ROUTER_QUEUE_TABLE",
    "ROUTER_WITNESS_TABLE",
    "RouterMemberRow",
    "RouterQueueRow",
    "RouterWitnessRow",
]

ROUTER_MEMBERS_TABLE = "fa_router_members"
ROUTER_WITNESS_TABLE = "fa_router_witness"
ROUTER_QUEUE_TABLE = "fa_router_queue"


class RouterMemberRow(SQLModel, table=True):
    """One machine the router may use (a `MemberSpec` as JSON), written by the agent."""

    __tablename__ = ROUTER_MEMBERS_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "instance_id", name="uq_fa_router_members_agent_instance"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    instance_id: int
    #: The spec's `want` (``serve`` | ``drain``), beside its JSON: a drain
    #: is never turned back into serve by the monitor's next write.
    want: str = "serve"
    data: str = Field(sa_type=Text)
    updated_at: datetime = Field(sa_type=UTCDateTime)


class RouterWitnessRow(SQLModel, table=True):
    """What the router saw of one machine (a `MachineWitness` as JSON), by its clock."""

    __tablename__ = ROUTER_WITNESS_TABLE
    __table_args__ = (
        UniqueConstraint("agent_id", "instance_id", name="uq_fa_router_witness_agent_instance"),
    )

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    instance_id: int
    data: str = Field(sa_type=Text)
    updated_at: datetime = Field(sa_type=UTCDateTime)


class RouterQueueRow(SQLModel, table=True):
    """What waits at the router for one agent's machines (a `RouterQueue` as JSON)."""

    __tablename__ = ROUTER_QUEUE_TABLE
    __table_args__ = (UniqueConstraint("agent_id", name="uq_fa_router_queue_agent"),)

    id: int | None = Field(default=None, primary_key=True)
    agent_id: str
    data: str = Field(sa_type=Text)
    updated_at: datetime = Field(sa_type=UTCDateTime)
