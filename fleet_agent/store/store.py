"""`Store`: synchronous, idempotent persistence of sessions, runs, messages and the inbox.

Temporal may retry an activity after its write already committed, so every
write is keyed on a natural key: inserts are `INSERT ... ON CONFLICT DO
NOTHING` and updates set deterministic values. Each method runs in its own
short transaction, and the engine's connection pool makes a `Store` safe to
share between the threads of Temporal's sync activity executor.

Opening a `Store` never creates anything: `create_all` is the explicit step
that creates a new store (for SQLite, its file) or upgrades an existing one.
"""

from __future__ import annotations

from datetime import datetime
from typing import get_args

from sqlalchemy import delete, update
from sqlmodel import Session, col, select

from .engine import create_sqlite_file
from .inbox import Inbox
from .records import MessageRecord, MessageRole, SessionRecord, StoreCondition
from .run_costs import RunCosts
from .run_reads import RunReads
from .run_writes import RunWrites
from .schema import read_version, upgrade
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
from .timestamps import require_aware

__all__ = ["Store"]

_ROLES: frozenset[str] = frozenset(get_args(MessageRole))


class Store(RunWrites, RunReads, RunCosts, Inbox, SessionSummaries):
    """The fleet agent's database: sessions, runs and their messages, the inbox."""

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

    # ------------------------------------------------------------ sessions

    def ensure_session(
        self, agent_id: str, session: int, reason: str, started_at: datetime
    ) -> None:
        """Record that `session` started; a repeat call keeps the first row."""
        stmt = self._insert_ignoring_conflict(
            SessionRow,
            ["agent_id", "session"],
            {
                "agent_id": agent_id,
                "session": session,
                "reason": reason,
                "started_at": require_aware(started_at, "started_at"),
            },
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def list_sessions(self, agent_id: str) -> list[SessionRecord]:
        """Every session of the agent, oldest first."""
        stmt = (
            select(SessionRow)
            .where(col(SessionRow.agent_id) == agent_id)
            .order_by(col(SessionRow.session))
        )
        with Session(self._engine) as db:
            return [
                SessionRecord(session=r.session, started_at=r.started_at, reason=r.reason)
                for r in db.exec(stmt)
            ]

    # ------------------------------------------------------------ messages

    def add_message(
        self,
        agent_id: str,
        run: int,
        seq: int,
        round: int,
        role: MessageRole,
        kind: str,
        content: str,
        created_at: datetime,
        in_prompt: bool = False,
    ) -> bool:
        """Insert one message; returns False if (agent_id, run, seq) already existed."""
        if role not in _ROLES:
            raise ValueError(f"role must be one of {sorted(_ROLES)}, got {role!r}")
        stmt = self._insert_ignoring_conflict(
            MessageRow,
            ["agent_id", "run", "seq"],
            {
                "agent_id": agent_id,
                "run": run,
                "seq": seq,
                "round": round,
                "role": role,
                "kind": kind,
                "content": content,
                "in_prompt": in_prompt,
                "created_at": require_aware(created_at, "created_at"),
            },
        )
        with self._engine.begin() as conn:
            # ON CONFLICT DO NOTHING reports 0 affected rows on both backends.
            inserted: int = conn.execute(stmt).rowcount
        return inserted == 1

    def replace_message(self, agent_id: str, run: int, seq: int, content: str) -> None:
        """Rewrite the content of a stored message (a finished run's settled
        replies, fleet_agent/llm/transcript.py); nothing when there is none."""
        with self._engine.begin() as conn:
            conn.execute(
                update(MessageRow)
                .where(
                    col(MessageRow.agent_id) == agent_id,
                    col(MessageRow.run) == run,
                    col(MessageRow.seq) == seq,
                )
                .values(content=content)
            )

    def get_message(self, agent_id: str, run: int, seq: int) -> MessageRecord | None:
        with Session(self._engine) as db:
            row = db.exec(
                select(MessageRow).where(
                    col(MessageRow.agent_id) == agent_id,
                    col(MessageRow.run) == run,
                    col(MessageRow.seq) == seq,
                )
            ).first()
            return None if row is None else _message_record(row)

    def run_messages(self, agent_id: str, run: int) -> list[MessageRecord]:
        """All messages of a run, in `seq` order."""
        stmt = (
            select(MessageRow)
            .where(col(MessageRow.agent_id) == agent_id, col(MessageRow.run) == run)
            .order_by(col(MessageRow.seq))
        )
        with Session(self._engine) as db:
            return [_message_record(row) for row in db.exec(stmt)]

    # ------------------------------------------------------------ maintenance

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


def _message_record(row: MessageRow) -> MessageRecord:
    return MessageRecord.model_validate(row, from_attributes=True)
