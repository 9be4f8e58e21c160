"""`Store`: synchronous, idempotent persistence of sessions, runs and messages.

Temporal may retry an activity after its write already committed, so every
write is keyed on a natural key: inserts are `INSERT ... ON CONFLICT DO
NOTHING` and updates set deterministic values. Each method runs in its own
short transaction, and the engine's connection pool makes a `Store` safe to
share between the threads of Temporal's sync activity executor.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args

from pydantic import TypeAdapter
from sqlalchemy import Connection, Engine, Executable, delete, func, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, select

from fleet_agent.models import ContextInfo, RunStatus, TokenUsage, Trigger, Verdict

from .engine import create_engine_for, default_database_url
from .records import HistoryEntry, MessageRecord, MessageRole, RunRecord, SessionRecord
from .tables import MessageRow, RunRow, SessionRow, ToolCallRow, all_tables, table_of
from .timestamps import require_aware

__all__ = ["Store"]

_TRIGGERS = TypeAdapter(list[Trigger])
_ROLES: frozenset[str] = frozenset(get_args(MessageRole))
_DIALECTS = frozenset({"sqlite", "postgresql"})


class Store:
    """The fleet agent's database: sessions, runs and their messages."""

    def __init__(self, url: str | None = None, *, engine: Engine | None = None) -> None:
        """Open the store at `url` (default: `default_database_url()`), or on `engine`.

        Pass `engine` (e.g. from `create_engine_for(url, connect_args=...)`) to
        control connection options; the caller then owns and disposes it.
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

    def __repr__(self) -> str:
        # Never show the password, even in tracebacks and debug logs.
        return f"Store({self._engine.url.render_as_string(hide_password=True)!r})"

    @property
    def engine(self) -> Engine:
        return self._engine

    def create_all(self) -> None:
        """Create the store's tables and indexes if they do not exist."""
        SessionRow.metadata.create_all(self._engine, tables=all_tables())

    def dispose(self) -> None:
        """Close pooled connections, if this store created its engine."""
        if self._owns_engine:
            self._engine.dispose()

    # ------------------------------------------------------------ sessions

    def ensure_session(
        self, agent_id: str, session: int, reason: str, started_at: datetime
    ) -> None:
        """Record that `session` started; a repeat call keeps the first row."""
        stmt = self._insert_ignoring_conflict(
            SessionRow,
            ["agent_id", "session"],
            agent_id=agent_id,
            session=session,
            reason=reason,
            started_at=require_aware(started_at, "started_at"),
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def latest_counters(self, agent_id: str) -> tuple[int, int]:
        """(highest run number, highest session number) ever stored, 0 when none.

        A freshly started agent continues from these so it never reuses a run
        number, even if its workflow state was lost.
        """
        with Session(self._engine) as db:
            max_run, max_run_session = db.exec(
                select(func.max(col(RunRow.run)), func.max(col(RunRow.session))).where(
                    col(RunRow.agent_id) == agent_id
                )
            ).one()
            max_session = db.exec(
                select(func.max(col(SessionRow.session))).where(
                    col(SessionRow.agent_id) == agent_id
                )
            ).one()
        return (max_run or 0, max(max_run_session or 0, max_session or 0))

    # ------------------------------------------------------------ runs

    def begin_run(
        self,
        agent_id: str,
        run: int,
        session: int,
        triggers: list[Trigger],
        trigger_block: str,
        started_at: datetime,
    ) -> None:
        """Insert the run as 'running'; a repeat call keeps the first row."""
        stmt = self._insert_ignoring_conflict(
            RunRow,
            ["agent_id", "run"],
            agent_id=agent_id,
            run=run,
            session=session,
            status=RunStatus.RUNNING.value,
            triggers_json=_TRIGGERS.dump_json(triggers).decode(),
            trigger_block=trigger_block,
            started_at=require_aware(started_at, "started_at"),
            ended_at=None,
            verdict_action=None,
            verdict_state_changed=None,
            verdict_error="",
            noop=False,
            # Mirrors RunResult's default; a 'running' row never reaches a
            # prompt anyway because prompt_history filters on status.
            in_prompt=True,
            error="",
            final_text="",
            actions_digest="",
            mutating_calls=0,
            tool_calls=0,
            rounds=0,
            input_tokens=0,
            output_tokens=0,
            cache_read_input_tokens=0,
            cache_creation_input_tokens=0,
            llm_seconds=0.0,
            history_runs_included=0,
            history_runs_dropped=0,
            estimated_prompt_tokens=0,
        )
        with self._engine.begin() as conn:
            conn.execute(stmt)

    def set_run_context(self, agent_id: str, run: int, info: ContextInfo) -> None:
        """Record how the run's prompt was built. Raises `KeyError` if the run is unknown."""
        with self._engine.begin() as conn:
            self._update_run(
                conn,
                agent_id,
                run,
                history_runs_included=info.history_runs_included,
                history_runs_dropped=info.history_runs_dropped,
                estimated_prompt_tokens=info.estimated_prompt_tokens,
            )

    def finish_run(
        self,
        agent_id: str,
        run: int,
        *,
        status: RunStatus,
        verdict: Verdict | None,
        verdict_error: str,
        noop: bool,
        in_prompt: bool,
        error: str,
        final_text: str,
        actions_digest: str,
        mutating_calls: int,
        tool_calls: int,
        rounds: int,
        usage: TokenUsage,
        llm_seconds: float,
        ended_at: datetime,
    ) -> None:
        """Record the run's outcome and which of its messages stay in the prompt.

        Only the run's last assistant message (its final text) can stay in
        later prompts, and only if the run itself does; every other message of
        the run is marked out of the prompt. Raises `KeyError` if the run is
        unknown (nothing is written then).
        """
        with self._engine.begin() as conn:
            self._update_run(
                conn,
                agent_id,
                run,
                status=RunStatus(status).value,
                verdict_action=None if verdict is None else verdict.action,
                verdict_state_changed=None if verdict is None else verdict.state_changed,
                verdict_error=verdict_error,
                noop=noop,
                in_prompt=in_prompt,
                error=error,
                final_text=final_text,
                actions_digest=actions_digest,
                mutating_calls=mutating_calls,
                tool_calls=tool_calls,
                rounds=rounds,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                llm_seconds=llm_seconds,
                ended_at=require_aware(ended_at, "ended_at"),
            )
            # The run row is written first, so on SQLite this transaction
            # already holds the write lock: the read below cannot deadlock.
            of_run = (col(MessageRow.agent_id) == agent_id) & (col(MessageRow.run) == run)
            last_assistant_seq = conn.execute(
                select(func.max(col(MessageRow.seq))).where(
                    of_run, col(MessageRow.role) == "assistant"
                )
            ).scalar_one()
            conn.execute(update(MessageRow).where(of_run).values(in_prompt=False))
            if in_prompt and last_assistant_seq is not None:
                conn.execute(
                    update(MessageRow)
                    .where(of_run, col(MessageRow.seq) == last_assistant_seq)
                    .values(in_prompt=True)
                )

    def get_run(self, agent_id: str, run: int) -> RunRecord | None:
        with Session(self._engine) as db:
            row = db.exec(
                select(RunRow).where(col(RunRow.agent_id) == agent_id, col(RunRow.run) == run)
            ).first()
            return None if row is None else _run_record(row)

    def list_runs(
        self,
        agent_id: str,
        *,
        limit: int = 50,
        before_run: int | None = None,
        session: int | None = None,
    ) -> list[RunRecord]:
        """Up to `limit` runs, newest first, optionally before a run / in a session."""
        stmt = select(RunRow).where(col(RunRow.agent_id) == agent_id)
        if before_run is not None:
            stmt = stmt.where(col(RunRow.run) < before_run)
        if session is not None:
            stmt = stmt.where(col(RunRow.session) == session)
        stmt = stmt.order_by(col(RunRow.run).desc()).limit(limit)
        with Session(self._engine) as db:
            return [_run_record(row) for row in db.exec(stmt)]

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

    def count_runs(self, agent_id: str) -> int:
        with Session(self._engine) as db:
            return db.exec(
                select(func.count()).select_from(RunRow).where(col(RunRow.agent_id) == agent_id)
            ).one()

    def prompt_history(self, agent_id: str, session: int, before_run: int) -> list[HistoryEntry]:
        """Finished, in-prompt runs of `session` before `before_run`, oldest first."""
        stmt = (
            select(RunRow)
            .where(
                col(RunRow.agent_id) == agent_id,
                col(RunRow.session) == session,
                col(RunRow.run) < before_run,
                col(RunRow.in_prompt).is_(True),
                col(RunRow.status) != RunStatus.RUNNING.value,
            )
            .order_by(col(RunRow.run))
        )
        with Session(self._engine) as db:
            return [
                HistoryEntry(
                    run=row.run,
                    started_at=row.started_at,
                    ended_at=row.ended_at,
                    status=RunStatus(row.status),
                    trigger_block=row.trigger_block,
                    final_text=row.final_text,
                    actions_digest=row.actions_digest,
                    noop=row.noop,
                )
                for row in db.exec(stmt)
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
            agent_id=agent_id,
            run=run,
            seq=seq,
            round=round,
            role=role,
            kind=kind,
            content=content,
            in_prompt=in_prompt,
            created_at=require_aware(created_at, "created_at"),
        )
        with self._engine.begin() as conn:
            # ON CONFLICT DO NOTHING reports 0 affected rows on both backends.
            inserted: int = conn.execute(stmt).rowcount
        return inserted == 1

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
        """Delete every session, run, message and journalled tool call of
        `agent_id` (tests and ops cleanup)."""
        with self._engine.begin() as conn:
            for model in (ToolCallRow, MessageRow, RunRow, SessionRow):
                conn.execute(delete(model).where(col(model.agent_id) == agent_id))

    # ------------------------------------------------------------ helpers

    def _insert_ignoring_conflict(
        self, model: type[SQLModel], key: list[str], **values: Any
    ) -> Executable:
        """`INSERT ... ON CONFLICT (key) DO NOTHING`: a retried write is a no-op."""
        table = table_of(model)
        insert = postgresql.insert if self._dialect == "postgresql" else sqlite.insert
        stmt = insert(table).values(values).on_conflict_do_nothing(index_elements=key)
        # SQLAlchemy only guarantees rowcount for UPDATE/DELETE unless asked;
        # add_message needs it to tell "inserted" from "already there".
        return stmt.execution_options(preserve_rowcount=True)

    @staticmethod
    def _update_run(conn: Connection, agent_id: str, run: int, **values: Any) -> None:
        stmt = (
            update(RunRow)
            .where(col(RunRow.agent_id) == agent_id, col(RunRow.run) == run)
            .values(**values)
        )
        # rowcount counts matched rows on SQLite and PostgreSQL, so a retried,
        # identical update still reports 1.
        if conn.execute(stmt).rowcount == 0:
            raise KeyError(f"no run {run} for agent {agent_id!r}")


def _run_record(row: RunRow) -> RunRecord:
    verdict = (
        None
        if row.verdict_action is None or row.verdict_state_changed is None
        else Verdict(action=row.verdict_action, state_changed=row.verdict_state_changed)
    )
    return RunRecord(
        agent_id=row.agent_id,
        run=row.run,
        session=row.session,
        status=RunStatus(row.status),
        triggers=_TRIGGERS.validate_json(row.triggers_json),
        trigger_block=row.trigger_block,
        started_at=row.started_at,
        ended_at=row.ended_at,
        verdict=verdict,
        verdict_error=row.verdict_error,
        noop=row.noop,
        in_prompt=row.in_prompt,
        error=row.error,
        final_text=row.final_text,
        actions_digest=row.actions_digest,
        mutating_calls=row.mutating_calls,
        tool_calls=row.tool_calls,
        rounds=row.rounds,
        usage=TokenUsage(
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            cache_read_input_tokens=row.cache_read_input_tokens,
            cache_creation_input_tokens=row.cache_creation_input_tokens,
        ),
        llm_seconds=row.llm_seconds,
        history_runs_included=row.history_runs_included,
        history_runs_dropped=row.history_runs_dropped,
        estimated_prompt_tokens=row.estimated_prompt_tokens,
    )


def _message_record(row: MessageRow) -> MessageRecord:
    return MessageRecord.model_validate(row, from_attributes=True)
