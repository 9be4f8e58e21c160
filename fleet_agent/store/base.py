"""`Repository`: the base every repository of the store is built on.

A repository reads and writes the tables of one concern through a `Store`'s
engine, which it borrows: `ToolJournal(store)`, `RunReads(store)`. It owns
nothing, so any number of them can share one store (docs/decisions/store.md).
"""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy import Engine, Executable
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import SQLModel

from .tables import table_of

__all__ = ["EngineHolder", "Repository"]


class EngineHolder(Protocol):
    """What a repository borrows from its store (a `Store`): the engine. A
    protocol, not `Store` itself, so that store.py, which holds the run log's
    repositories, is imported by none of them."""

    @property
    def engine(self) -> Engine: ...


class Repository:
    """The store's engine and its dialect's INSERT, for the methods of a repository."""

    def __init__(self, store: EngineHolder) -> None:
        self._engine = store.engine
        # `ON CONFLICT` is dialect-specific SQL: each backend has its own insert().
        self._insert = (
            postgresql.insert if self._engine.dialect.name == "postgresql" else sqlite.insert
        )

    def _insert_ignoring_conflict(
        self, model: type[SQLModel], key: list[str], values: dict[str, Any] | list[dict[str, Any]]
    ) -> Executable:
        """`INSERT ... ON CONFLICT (key) DO NOTHING`: a retried write is a no-op."""
        stmt = (
            self._insert(table_of(model)).values(values).on_conflict_do_nothing(index_elements=key)
        )
        # SQLAlchemy only guarantees rowcount for UPDATE/DELETE unless asked;
        # callers need it to tell "inserted" from "already there".
        return stmt.execution_options(preserve_rowcount=True)
