"""The sessions' rolling summaries (`fa_summaries`): each version with the runs it covers."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict
from sqlmodel import Session, col, select

from .base import Repository
from .tables import SummaryRow
from .timestamps import require_aware

__all__ = ["SessionSummaries", "SummaryRecord", "SummarySource"]

SummarySource = Literal["llm", "digest"]


class SummaryRecord(BaseModel):
    """One version of a session's summary (see `SummaryRow`)."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    session: int
    made_by_run: int
    first_run: int
    from_run: int
    upto_run: int
    body: str
    source: SummarySource
    fallback_reason: str = ""
    tokens: int
    created_at: datetime


def _record(row: SummaryRow) -> SummaryRecord:
    return SummaryRecord.model_validate(row.model_dump(exclude={"id"}))


class SessionSummaries(Repository):
    """Writes and reads of `fa_summaries`; one short transaction each."""

    def add_summary(self, summary: SummaryRecord) -> SummaryRecord:
        """Store a version; a retried write keeps the first one, which is returned."""
        values = summary.model_dump()
        values["created_at"] = require_aware(summary.created_at, "created_at")
        stmt = self._insert_ignoring_conflict(
            SummaryRow, ["agent_id", "session", "upto_run"], values
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)
        with Session(self._engine) as db:
            row = db.exec(
                select(SummaryRow).where(
                    col(SummaryRow.agent_id) == summary.agent_id,
                    col(SummaryRow.session) == summary.session,
                    col(SummaryRow.upto_run) == summary.upto_run,
                )
            ).one()
            return _record(row)

    def latest_summary(
        self, agent_id: str, session: int, before_run: int | None = None
    ) -> SummaryRecord | None:
        """The newest version of the session's summary, optionally the newest one
        written by a run before `before_run` (each round of a run reads the
        same one)."""
        stmt = select(SummaryRow).where(
            col(SummaryRow.agent_id) == agent_id, col(SummaryRow.session) == session
        )
        if before_run is not None:
            stmt = stmt.where(col(SummaryRow.made_by_run) < before_run)
        stmt = stmt.order_by(col(SummaryRow.upto_run).desc()).limit(1)
        with Session(self._engine) as db:
            row = db.exec(stmt).first()
            return None if row is None else _record(row)

    def summary_of_run(self, agent_id: str, run: int) -> SummaryRecord | None:
        """The version that folded `run` in (its `from_run`..`upto_run`), if any."""
        stmt = select(SummaryRow).where(
            col(SummaryRow.agent_id) == agent_id,
            col(SummaryRow.from_run) <= run,
            col(SummaryRow.upto_run) >= run,
        )
        with Session(self._engine) as db:
            row = db.exec(stmt.order_by(col(SummaryRow.upto_run)).limit(1)).first()
            return None if row is None else _record(row)

    def session_summaries(self, agent_id: str, session: int) -> list[SummaryRecord]:
        """Every version of the session's summary, oldest first."""
        stmt = (
            select(SummaryRow)
            .where(col(SummaryRow.agent_id) == agent_id, col(SummaryRow.session) == session)
            .order_by(col(SummaryRow.upto_run))
        )
        with Session(self._engine) as db:
            return [_record(row) for row in db.exec(stmt)]
