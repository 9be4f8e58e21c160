"""`Store`: the run log's database, its engine, and the repositories on it.

Temporal may retry an activity after its write already committed, so every
write is keyed on a natural key: inserts are `INSERT ... ON CONFLICT DO
NOTHING` and updates set deterministic values. Each method runs in its own
short transaction, and the engine's connection pool makes a `Store` safe to
share between the threads of Temporal's sync activity executor.

A `Store` owns the engine and the schema; the reads and writes are its
repositories, each a `Repository` on the store's engine (base.py): the run
log's are attributes (`store.run_reads.get_run(...)`), the others are built
by their users (`ToolJournal(store)`). Why: docs/decisions/store.md.

Opening a `Store` never creates anything: `create_all` is the explicit step
that creates a new store (for SQLite, its file) or upgrades an existing one.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, delete
from sqlmodel import col

from .engine import create_engine_for, create_sqlite_file, default_database_url, sqlite_path
from .inbox import Inbox
from .messages import Messages
from .records import StoreCondition
from .run_costs import RunCosts
from .run_reads import RunReads
from .run_writes import RunWrites
from .schema import read_version, upgrade
from .sessions import Sessions
from .summaries import SessionSummaries
from .tables import (
    FailedHostRow,
    FleetSnapshotRow,
    InboxRow,
    MessageRow,
    RunCostRow,
    RunRow,
    RunSpendRow,
    SessionRow,
    SpendHourRow,
    SpendInstanceRow,
    SummaryRow,
    ToolCallRow,
)

__all__ = ["Store"]

_DIALECTS = frozenset({"sqlite", "postgresql"})


class Store:
    """The fleet agent's database: sessions, runs and their messages, the inbox."""

    def __init__(self, url: str | None = None, *, engine: Engine | None = None) -> None:
        """Open the store at `url` (default: `default_database_url()`), or on `engine`.

        Pass `engine` (e.g. from `create_engine_for(url, connect_args=...)`) to
        control connection options; the caller then owns and disposes it.
        Nothing is created here: see `create_all`.
        """
        if engine is not None and url is not None:
            raise ValueError("pass either url or engine, not both")
        self._owns_engine = engine is None
        self._engine = (
            engine if engine is not None else create_engine_for(url or default_database_url())
        )
        dialect = self._engine.dialect.name
        if dialect not in _DIALECTS:
            raise ValueError(f"unsupported database dialect for the store: {dialect}")
        self._sqlite_path: Path | None = sqlite_path(self._engine.url)
        # The run log's repositories, each named after its module.
        self.sessions = Sessions(self)
        self.messages = Messages(self)
        self.run_writes = RunWrites(self)
        self.run_reads = RunReads(self)
        self.run_costs = RunCosts(self)
        self.inbox = Inbox(self)
        self.summaries = SessionSummaries(self)

    def __repr__(self) -> str:
        # Never show the password, even in tracebacks and debug logs.
        return f"Store({self.where!r})"

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def where(self) -> str:
        """The store's URL with its password hidden, for messages and logs."""
        return self._engine.url.render_as_string(hide_password=True)

    def dispose(self) -> None:
        """Close pooled connections, if this store created its engine."""
        if self._owns_engine:
            self._engine.dispose()

    def condition(self) -> StoreCondition:
        """Whether the store exists and which schema version it has (reads only)."""
        if self._sqlite_path is not None and not self._sqlite_path.exists():
            return StoreCondition(exists=False, version=None)
        with self._engine.connect() as conn:
            return StoreCondition(exists=True, version=read_version(conn))

    def create_all(self) -> int | None:
        """Create the store, or bring an existing one to the current schema.

        For SQLite this creates the file if it is missing (its folder must
        exist). Returns the schema version found (None: there was no store).
        Raises `SchemaError` if the store is newer than this code.
        """
        if self._sqlite_path is not None:
            create_sqlite_file(self._sqlite_path)
        return upgrade(self._engine)

    def delete_agent(self, agent_id: str) -> None:
        """Delete every session, run, message, inbox text, journalled tool call,
        remembered failed host, spend and cost record, session summary and fleet
        snapshot of `agent_id` (tests and ops cleanup)."""
        models = (
            ToolCallRow,
            MessageRow,
            RunRow,
            RunSpendRow,
            RunCostRow,
            SessionRow,
            InboxRow,
            FailedHostRow,
            SpendInstanceRow,
            SpendHourRow,
            SummaryRow,
            FleetSnapshotRow,
        )
        with self._engine.begin() as conn:
            for model in models:
                conn.execute(delete(model).where(col(model.agent_id) == agent_id))
