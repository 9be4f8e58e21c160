"""The inbox: full texts of operator messages, so workflows carry only keys.

A human message can be 20,000 characters and hundreds can arrive while the
agent is paused. The workflow stashes each text under a key and keeps a
preview in its trigger (`Trigger.text_key`); `load_context` puts the full
texts back before the run's triggers are rendered and stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

from sqlmodel import Session, col, select

from fleet_agent.models import InboxItem

from .base import Repository
from .tables import InboxRow
from .timestamps import require_aware

__all__ = ["Inbox"]

# Rows per INSERT and keys per IN (...): well under SQLite's bound-variable limit.
_BATCH = 100

_T = TypeVar("_T")


def _batches(items: Sequence[_T]) -> Iterator[list[_T]]:
    for start in range(0, len(items), _BATCH):
        yield list(items[start : start + _BATCH])


class Inbox(Repository):
    """Operator message texts, unique per (agent, key)."""

    def stash_messages(self, agent_id: str, items: Sequence[InboxItem]) -> int:
        """Keep the texts of `items`; returns how many keys were new.

        A key already stored keeps its first text, so a retried stash is a no-op.
        """
        rows = [
            {
                "agent_id": agent_id,
                "key": item.key,
                "seq": item.seq,
                "author": item.author,
                "text": item.text,
                "received_at": require_aware(item.received_at, "received_at"),
            }
            for item in items
        ]
        inserted = 0
        with self._engine.begin() as conn:
            for batch in _batches(rows):
                stmt = self._insert_ignoring_conflict(InboxRow, ["agent_id", "key"], batch)
                inserted += conn.execute(stmt).rowcount
        return inserted

    def inbox_texts(self, agent_id: str, keys: Iterable[str]) -> dict[str, InboxItem]:
        """The stored items of `keys`, by key; keys not (yet) stored are absent."""
        found: dict[str, InboxItem] = {}
        with Session(self._engine) as db:
            for batch in _batches(sorted(set(keys))):
                stmt = select(InboxRow).where(
                    col(InboxRow.agent_id) == agent_id, col(InboxRow.key).in_(batch)
                )
                for row in db.exec(stmt):
                    found[row.key] = InboxItem(
                        key=row.key,
                        seq=row.seq,
                        author=row.author,
                        text=row.text,
                        received_at=row.received_at,
                    )
        return found
