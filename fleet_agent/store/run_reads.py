"""Reads of the run log: runs, their attempts, and the history a prompt is built from."""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import ScalarSelect, func
from sqlalchemy import select as sa_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from fleet_agent.models import RunStatus, TokenUsage, Verdict

from .base import Repository
from .records import HistoryEntry, RunRecord
from .run_writes import TRIGGERS, target_attempt
from .tables import RunCostRow, RunRow, RunSpendRow, SessionRow

__all__ = ["RunReads", "latest_finished_attempt"]


@cache
def latest_finished_attempt() -> ScalarSelect[Any]:
    """The highest attempt of the outer `fa_runs` row's run that is no longer
    running: compare `RunRow.attempt` with it to keep each run once, by the
    attempt whose record counts (a correlated subquery).

    Built once: an alias of `fa_runs` proxies each of its columns, which cost
    about 2 ms a call, three calls a run; the construct is immutable and
    correlates to whichever statement embeds it."""
    other = aliased(RunRow)
    return (
        select(func.max(col(other.attempt)))
        .where(
            col(other.agent_id) == col(RunRow.agent_id),
            col(other.run) == col(RunRow.run),
            col(other.status) != RunStatus.RUNNING.value,
        )
        .scalar_subquery()
    )


class RunReads(Repository):
    """Runs and their attempts as records; the prompt's history."""

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

    def get_run(self, agent_id: str, run: int, *, attempt: int | None = None) -> RunRecord | None:
        """The latest attempt of the run, or the given one; None if there is none."""
        stmt = select(RunRow).where(col(RunRow.agent_id) == agent_id, col(RunRow.run) == run)
        if attempt is not None:
            stmt = stmt.where(col(RunRow.attempt) == attempt)
        stmt = stmt.order_by(col(RunRow.attempt).desc()).limit(1)
        with Session(self._engine) as db:
            row = db.exec(stmt).first()
            return None if row is None else _with_spend(db, agent_id, [_run_record(row)])[0]

    def get_attempt_of(self, agent_id: str, run: int, workflow_run_id: str) -> RunRecord | None:
        """The attempt that writes by `workflow_run_id` target (see `finish_run`), if any."""
        with self._engine.connect() as conn:
            attempt = target_attempt(conn, agent_id, run, workflow_run_id)
        return None if attempt is None else self.get_run(agent_id, run, attempt=attempt)

    def run_attempts(self, agent_id: str, run: int) -> list[RunRecord]:
        """Every attempt of the run, oldest first."""
        stmt = (
            select(RunRow)
            .where(col(RunRow.agent_id) == agent_id, col(RunRow.run) == run)
            .order_by(col(RunRow.attempt))
        )
        with Session(self._engine) as db:
            return _with_spend(db, agent_id, [_run_record(row) for row in db.exec(stmt)])

    def list_runs(
        self,
        agent_id: str,
        *,
        limit: int = 50,
        before_run: int | None = None,
        session: int | None = None,
    ) -> list[RunRecord]:
        """Up to `limit` records, every attempt of each run, newest run and attempt first,
        optionally before a run / in a session."""
        stmt = select(RunRow).where(col(RunRow.agent_id) == agent_id)
        if before_run is not None:
            stmt = stmt.where(col(RunRow.run) < before_run)
        if session is not None:
            stmt = stmt.where(col(RunRow.session) == session)
        stmt = stmt.order_by(col(RunRow.run).desc(), col(RunRow.attempt).desc()).limit(limit)
        with Session(self._engine) as db:
            return _with_spend(db, agent_id, [_run_record(row) for row in db.exec(stmt)])

    def runs_with_message(self, agent_id: str, message_id: str) -> list[RunRecord]:
        """The attempts whose triggers hold the human message the sender
        called `message_id`, newest first (none until a run took it in)."""
        if not message_id:
            return []
        # The JSON is compact (TRIGGERS.dump_json), and ids hold no quote or
        # backslash (HumanMessage): a substring match finds exactly this id.
        needle = f'"message_id":"{message_id}"'
        stmt = (
            select(RunRow)
            .where(
                col(RunRow.agent_id) == agent_id,
                col(RunRow.triggers_json).contains(needle, autoescape=True),
            )
            .order_by(col(RunRow.run).desc(), col(RunRow.attempt).desc())
        )
        with Session(self._engine) as db:
            found = [_run_record(row) for row in db.exec(stmt)]
            found = [r for r in found if any(t.message_id == message_id for t in r.triggers)]
            return _with_spend(db, agent_id, found)

    def count_runs(self, agent_id: str) -> int:
        """How many distinct runs the agent has (attempts of one run count once)."""
        with Session(self._engine) as db:
            return db.exec(
                select(func.count(func.distinct(col(RunRow.run)))).where(
                    col(RunRow.agent_id) == agent_id
                )
            ).one()

    def prompt_history(
        self, agent_id: str, session: int, before_run: int, after_run: int = 0
    ) -> list[HistoryEntry]:
        """Finished, in-prompt runs of `session` after `after_run` (the last run
        the session's summary covers) and before `before_run`, oldest first.

        One entry per run: its latest finished attempt, which is left out if
        that attempt is not in the prompt.
        """
        # The eight columns a history entry needs, as plain rows: the ORM's
        # whole objects (every column, the identity map) cost twice the time,
        # and this runs twice a run (load_context, call_llm).
        stmt = (
            sa_select(  # sqlmodel's select types at most four columns
                col(RunRow.run),
                col(RunRow.started_at),
                col(RunRow.ended_at),
                col(RunRow.status),
                col(RunRow.trigger_block),
                col(RunRow.final_text),
                col(RunRow.actions_digest),
                col(RunRow.noop),
            )
            .where(
                col(RunRow.agent_id) == agent_id,
                col(RunRow.session) == session,
                col(RunRow.run) < before_run,
                col(RunRow.run) > after_run,
                col(RunRow.status) != RunStatus.RUNNING.value,
                col(RunRow.attempt) == latest_finished_attempt(),
                col(RunRow.in_prompt).is_(True),
            )
            .order_by(col(RunRow.run))
        )
        with self._engine.connect() as conn:
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
                for row in conn.execute(stmt)
            ]


def _with_spend(db: Session, agent_id: str, records: list[RunRecord]) -> list[RunRecord]:
    """`records` with the $/hour each attempt added and removed (`fa_run_spend`),
    its LLM cost and tools' seconds (`fa_run_costs`)."""
    runs = sorted({r.run for r in records})
    if not runs:
        return records
    stmt = select(RunSpendRow).where(
        col(RunSpendRow.agent_id) == agent_id, col(RunSpendRow.run).in_(runs)
    )
    found = {(s.run, s.attempt): s for s in db.exec(stmt)}
    costs_stmt = select(RunCostRow).where(
        col(RunCostRow.agent_id) == agent_id, col(RunCostRow.run).in_(runs)
    )
    costs = {(c.run, c.attempt): c for c in db.exec(costs_stmt)}
    out = []
    for record in records:
        key = (record.run, record.attempt)
        update: dict[str, float | str] = {}
        if (spend := found.get(key)) is not None:
            update |= {"dph_added": spend.dph_added, "dph_removed": spend.dph_removed}
        if (cost := costs.get(key)) is not None:
            update |= {
                "cost_usd": cost.cost_usd,
                "model": cost.model,
                "tool_seconds": cost.tool_seconds,
            }
        out.append(record.model_copy(update=update) if update else record)
    return out


def _run_record(row: RunRow) -> RunRecord:
    verdict = (
        None
        if row.verdict_action is None or row.verdict_state_changed is None
        else Verdict(action=row.verdict_action, state_changed=row.verdict_state_changed)
    )
    return RunRecord(
        agent_id=row.agent_id,
        run=row.run,
        attempt=row.attempt,
        workflow_run_id=row.workflow_run_id,
        session=row.session,
        status=RunStatus(row.status),
        triggers=TRIGGERS.validate_json(row.triggers_json),
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
        stop_reasons=[r for r in row.stop_reasons.split(",") if r],
        usage=TokenUsage(
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            cache_read_input_tokens=row.cache_read_input_tokens,
            cache_creation_input_tokens=row.cache_creation_input_tokens,
            cache_creation_1h_input_tokens=row.cache_creation_1h_input_tokens,
            thinking_tokens=row.thinking_tokens,
        ),
        llm_seconds=row.llm_seconds,
        history_runs_included=row.history_runs_included,
        history_runs_dropped=row.history_runs_dropped,
        estimated_prompt_tokens=row.estimated_prompt_tokens,
    )
