"""The runs' conversation messages (`fa_messages`), keyed by (agent, run, seq).

Messages are keyed by run, not attempt: a replay after a reset reuses the
stored LLM replies on purpose (fleet_agent/store/run_writes.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import get_args

from sqlalchemy import update
from sqlmodel import Session, col, select

from .base import Repository
from .records import MessageRecord, MessageRole
from .tables import MessageRow
from .timestamps import require_aware

__all__ = ["Messages"]

_ROLES: frozenset[str] = frozenset(get_args(MessageRole))


class Messages(Repository):
    """Writes and reads of `fa_messages`; one short transaction each."""

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


def _message_record(row: MessageRow) -> MessageRecord:
    return MessageRecord.model_validate(row, from_attributes=True)
