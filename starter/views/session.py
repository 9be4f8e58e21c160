"""The session's rolling summaries from the store: `fleet-agent session` and the
summary line of `show-run`. Reads only."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.exc import SQLAlchemyError

from fleet_agent.llm.prompt import format_time
from fleet_agent.store import SummaryRecord
from starter.agent_client import CliError
from starter.views.runlog import open_store

__all__ = ["read_session_summaries", "read_summary_of_run", "summaries_text", "summary_text"]


def read_session_summaries(agent_id: str, session: int | None) -> tuple[int, list[SummaryRecord]]:
    """(the session, its summaries oldest first); the newest session by default."""
    store = open_store()
    try:
        if session is None:
            session = store.run_reads.latest_counters(agent_id)[1]
            if session == 0:
                raise CliError(f"agent {agent_id!r} has no session in the run log")
        return session, store.summaries.session_summaries(agent_id, session)
    except SQLAlchemyError as exc:
        raise CliError(f"cannot read the run log ({store!r}): {str(exc).splitlines()[0]}") from None
    finally:
        store.dispose()


def read_summary_of_run(agent_id: str, run: int) -> SummaryRecord | None:
    """The summary version that folded `run` in, if any."""
    store = open_store()
    try:
        return store.summaries.summary_of_run(agent_id, run)
    except SQLAlchemyError as exc:
        raise CliError(f"cannot read the run log ({store!r}): {str(exc).splitlines()[0]}") from None
    finally:
        store.dispose()


def _heading(s: SummaryRecord) -> str:
    why = f" — {s.fallback_reason}" if s.fallback_reason else ""
    return (
        f"summary of runs #{s.first_run}–#{s.upto_run} (folded #{s.from_run}–#{s.upto_run} "
        f"before run #{s.made_by_run}, {format_time(s.created_at)}, by the "
        f"{'model' if s.source == 'llm' else 'digest'}{why}, ~{s.tokens} tokens)"
    )


def summary_text(s: SummaryRecord) -> str:
    """One summary version as the operator reads it."""
    body = "\n".join(f"    {line}" for line in s.body.splitlines())
    return f"{_heading(s)}\n{body}"


def summaries_text(session: int, summaries: Sequence[SummaryRecord]) -> str:
    """Every version of a session's summary, oldest first (the newest is in the prompt)."""
    if not summaries:
        return f"session {session}: no summary yet (every run is still in the prompt's window)"
    parts = [f"session {session}: {len(summaries)} summary version(s), newest last"]
    parts += [summary_text(s) for s in summaries]
    return "\n\n".join(parts)
