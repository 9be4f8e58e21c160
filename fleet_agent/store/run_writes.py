"""Writes to the run log: one record per attempt of each run.

A run (`<agent>/run-<n>`) normally executes once: attempt 1. After a
`temporal workflow reset` to before it, it executes again under a new Temporal
workflow run ID, and its writes open attempt 2, and so on; no attempt is ever
overwritten. Writes name the workflow run they come from (`workflow_run_id`):
a repeat from the same workflow run (an activity retry) changes nothing, and
"" means "unknown: the latest attempt". Messages are keyed by run, not
attempt: a replay reuses the stored LLM replies on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pydantic import TypeAdapter
from sqlalchemy import Connection, Row, func, update
from sqlmodel import col, select

from fleet_agent.models import ContextInfo, RunStatus, TokenUsage, Trigger, Verdict

from .base import Repository
from .tables import MessageRow, RunCostRow, RunRow, RunSpendRow, table_of
from .timestamps import require_aware

__all__ = ["TRIGGERS", "RunWrites", "target_attempt"]

TRIGGERS = TypeAdapter(list[Trigger])
# begin_run re-reads after losing an insert race to a concurrent begin_run;
# each lost race means another attempt was opened, so a few rounds suffice.
_BEGIN_ROUNDS = 5


class RunWrites(Repository):
    """Opening and closing attempts of runs."""

    def begin_run(
        self,
        agent_id: str,
        run: int,
        session: int,
        triggers: list[Trigger],
        trigger_block: str,
        started_at: datetime,
        workflow_run_id: str = "",
    ) -> int:
        """Open an attempt of the run as 'running' and return its number.

        The first call opens attempt 1. A call from a workflow run that has no
        attempt yet (a replay after a reset) opens the next one. A repeat from
        a workflow run that already has one, or a call with workflow_run_id ""
        once the run exists, changes nothing and returns that attempt.
        """
        values: dict[str, Any] = {
            "agent_id": agent_id,
            "run": run,
            "workflow_run_id": workflow_run_id,
            "session": session,
            "status": RunStatus.RUNNING.value,
            "triggers_json": TRIGGERS.dump_json(triggers).decode(),
            "trigger_block": trigger_block,
            "started_at": require_aware(started_at, "started_at"),
            "ended_at": None,
            "verdict_action": None,
            "verdict_state_changed": None,
            "verdict_error": "",
            "noop": False,
            # Mirrors RunResult's default; a 'running' row never reaches a
            # prompt anyway because prompt_history filters on status.
            "in_prompt": True,
            "error": "",
            "final_text": "",
            "actions_digest": "",
            "mutating_calls": 0,
            "tool_calls": 0,
            "rounds": 0,
            "stop_reasons": "",
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_creation_1h_input_tokens": 0,
            "thinking_tokens": 0,
            "llm_seconds": 0.0,
            "history_runs_included": 0,
            "history_runs_dropped": 0,
            "estimated_prompt_tokens": 0,
        }
        for _ in range(_BEGIN_ROUNDS):
            with self._engine.begin() as conn:
                attempts = _attempts(conn, agent_id, run)
                if attempts and not workflow_run_id:
                    return int(attempts[-1].attempt)
                own = [a.attempt for a in attempts if a.workflow_run_id == workflow_run_id]
                if own:
                    return int(own[0])
                attempt = attempts[-1].attempt + 1 if attempts else 1
                stmt = self._insert_ignoring_conflict(
                    RunRow, ["agent_id", "run", "attempt"], {**values, "attempt": attempt}
                )
                if conn.execute(stmt).rowcount == 1:
                    return int(attempt)
            # A concurrent begin_run took that attempt number: look again.
        raise RuntimeError(f"could not open run {run} of {agent_id!r}: too many concurrent writers")

    def set_run_context(
        self, agent_id: str, run: int, info: ContextInfo, workflow_run_id: str = ""
    ) -> None:
        """Record how the attempt's prompt was built. Raises `KeyError` if there is none."""
        with self._engine.begin() as conn:
            self._update_attempt(conn, agent_id, run, workflow_run_id, **_context_values(info))

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
        stop_reasons: Sequence[str] = (),
        llm_seconds: float,
        ended_at: datetime,
        workflow_run_id: str = "",
        dph_added: float = 0.0,
        dph_removed: float = 0.0,
        cost_usd: float = 0.0,
        tool_seconds: float = 0.0,
        model: str = "",
        context: ContextInfo | None = None,
    ) -> None:
        """Record the attempt's outcome and which of the run's messages stay in the prompt
        (and, given `context`, how its prompt was built, as `set_run_context`
        does: one transaction for both).

        The attempt is the one `workflow_run_id` opened ("": the latest). Only
        the run's last assistant message (its final text) can stay in later
        prompts, and only if the run itself does; every other message of the
        run is marked out of the prompt. The $/hour the attempt added and
        removed go to `fa_run_spend`, its LLM cost (priced by the caller)
        and tools' seconds to `fa_run_costs`, beside `fa_runs` (a table only
        added needs no schema version). Raises `KeyError` if there is no such
        attempt (nothing is written then).
        """
        with self._engine.begin() as conn:
            attempt = self._update_attempt(
                conn,
                agent_id,
                run,
                workflow_run_id,
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
                stop_reasons=",".join(stop_reasons),
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                cache_creation_1h_input_tokens=usage.cache_creation_1h_input_tokens,
                thinking_tokens=usage.thinking_tokens,
                llm_seconds=llm_seconds,
                ended_at=require_aware(ended_at, "ended_at"),
                **({} if context is None else _context_values(context)),
            )
            costs = {"cost_usd": cost_usd, "tool_seconds": tool_seconds, "model": model}
            for model_, figures in (
                (RunSpendRow, {"dph_added": dph_added, "dph_removed": dph_removed}),
                (RunCostRow, costs),
            ):
                stmt = self._insert(table_of(model_)).values(
                    agent_id=agent_id, run=run, attempt=attempt, **figures
                )
                conn.execute(
                    stmt.on_conflict_do_update(
                        index_elements=["agent_id", "run", "attempt"], set_=figures
                    )
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

    @staticmethod
    def _update_attempt(
        conn: Connection, agent_id: str, run: int, workflow_run_id: str, **values: Any
    ) -> int:
        """Update the attempt `workflow_run_id` targets; returns its number."""
        attempt = target_attempt(conn, agent_id, run, workflow_run_id)
        if attempt is None:
            by = f" opened by workflow run {workflow_run_id!r}" if workflow_run_id else ""
            raise KeyError(f"no attempt of run {run} of agent {agent_id!r}{by}")
        stmt = (
            update(RunRow)
            .where(
                col(RunRow.agent_id) == agent_id,
                col(RunRow.run) == run,
                col(RunRow.attempt) == attempt,
            )
            .values(**values)
        )
        conn.execute(stmt)
        return attempt


def _context_values(info: ContextInfo) -> dict[str, Any]:
    """The run row's columns of its prompt bookkeeping."""
    return {
        "history_runs_included": info.history_runs_included,
        "history_runs_dropped": info.history_runs_dropped,
        "estimated_prompt_tokens": info.estimated_prompt_tokens,
    }


def _attempts(conn: Connection, agent_id: str, run: int) -> Sequence[Row[int, str]]:
    """(attempt, workflow_run_id) of every attempt of the run, oldest first."""
    return conn.execute(
        select(col(RunRow.attempt), col(RunRow.workflow_run_id))
        .where(col(RunRow.agent_id) == agent_id, col(RunRow.run) == run)
        .order_by(col(RunRow.attempt))
    ).all()


def target_attempt(conn: Connection, agent_id: str, run: int, workflow_run_id: str) -> int | None:
    """The attempt a write from `workflow_run_id` belongs to.

    The one that workflow run opened; with "" the latest; and the latest too
    when it was opened by a writer that did not name its workflow run (a
    record from before attempts existed). None when there is no such attempt.
    """
    attempts = _attempts(conn, agent_id, run)
    if not attempts:
        return None
    if workflow_run_id:
        for a in attempts:
            if a.workflow_run_id == workflow_run_id:
                return int(a.attempt)
        if attempts[-1].workflow_run_id:
            return None
    return int(attempts[-1].attempt)
