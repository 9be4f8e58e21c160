"""`StoreBase`: the engine and the idempotent-insert helper every part of the store uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Executable
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import SQLModel

from .engine import create_engine_for, default_database_url, sqlite_path
from .tables import table_of

__all__ = ["StoreBase"]

_DIALECTS = frozenset({"sqlite", "postgresql"})


class StoreBase:
    """Owns (or borrows) the engine; the parts of `Store` build on it."""

    def __init__(self, url: str | None = None, *, engine: Engine | None = None) -> None:
        """Open the store at `url` (default: `default_database_url()`), or on `engine`.

        Pass `engine` (e.g. from `create_engine_for(url, connect_args=...)`) to
        control connection options; the caller then owns and disposes it.
        Nothing is created here: see `Store.create_all`.
        """
        if engine is not None and url is not None:
            raise ValueError("pass either url or engine, not both")
        self._owns_engine = engine is None
        self._engine = (
            engine if engine is not None else create_engine_for(url or default_database_url())
        )
        self._dialect = self._engine.dialect.name
        if self._dialect not in _DIALECTS:
            raise ValueError(f"unsupported database dialect for the store: {self._dialect}")
        self._sqlite_path: Path | None = sqlite_path(self._engine.url)

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

    def _insert_ignoring_conflict(
        self, model: type[SQLModel], key: list[str], values: dict[str, Any] | list[dict[str, Any]]
    ) -> Executable:
        """`INSERT ... ON CONFLICT (key) DO NOTHING`: a retried write is a no-op."""
        table = table_of(model)
        insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
        stmt = insert(table).values(values).on_conflict_do_nothing(index_elements=key)
        # SQLAlchemy only guarantees rowcount for UPDATE/DELETE unless asked;
        # callers need it to tell "inserted" from "already there".
        return stmt.execution_options(preserve_rowcount=True)
