"""The agent's sessions (`fa_sessions`): when and why each conversation began."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select

from .base import Repository
from .records import SessionRecord
from .tables import SessionRow
from .timestamps import require_aware

__all__ = ["Sessions"]


class Sessions(Repository):
    """Writes and reads of `fa_sessions`; one short transaction each."""

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
