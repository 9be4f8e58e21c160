"""The run log from the store: `fleet-agent runs` and the `show-run` audit view.

Reads only. The store is the worker's (fleet_agent.store.default_database_url:
FLEET_DATABASE_URL, else the local stack's file for TEMPORAL_PORT); a missing
SQLite file is reported instead of silently created, since an empty log would
mislead the operator.
A run executed again after a `temporal workflow reset` has several attempts;
each is shown, the original as `#12` and the later ones as `#12 replay 2`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from fleet_agent.llm.transcript import StoredReply, StoredToolResults
from fleet_agent.models import LlmTotals
from fleet_agent.store import (
    SCHEMA_VERSION,
    MessageRecord,
    RunRecord,
    Store,
    default_database_url,
    redacted_url,
)
from fleet_agent.store.engine import DATABASE_URL_ENV
from starter.agent_client import CliError
from starter.views.cost import cached_share, round_cost
from starter.views.render import (
    dph_change_text,
    fmt_duration,
    fmt_time,
    table,
    trigger_summary,
    verdict_text,
)

__all__ = [
    "badges",
    "message_text",
    "open_store",
    "read_run",
    "read_runs",
    "read_session_totals",
    "run_detail",
    "run_label",
    "runs_table",
]

_MAX_TRIGGERS_WIDTH = 40


def open_store() -> Store:
    """The run log the worker writes (`default_database_url`), opened for reading;
    a `CliError` when it is missing, unreadable or of another schema version."""
    url = default_database_url(make_folder=False)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and not Path(parsed.database or "").is_file():
        raise CliError(
            f"no run log at {redacted_url(url)}: set {DATABASE_URL_ENV} to the worker's database"
        )
    try:
        store = Store(url)
    except (ValueError, SQLAlchemyError) as exc:
        raise CliError(f"cannot open the run log at {redacted_url(url)}: {exc}") from None
    try:
        version = store.condition().version
    except SQLAlchemyError as exc:
        store.dispose()
        raise _store_error(store, exc) from None
    if version != SCHEMA_VERSION:
        store.dispose()
        if version is None:
            raise CliError(f"no run log at {store.where}: the database has no fleet-agent tables")
        advice = (
            "start the worker once to upgrade it"
            if version < SCHEMA_VERSION
            else "upgrade fleet-agent"
        )
        raise CliError(
            f"the run log at {store.where} has schema version {version}, this fleet-agent "
            f"reads version {SCHEMA_VERSION}: {advice}"
        )
    return store


def _store_error(store: Store, exc: SQLAlchemyError) -> CliError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return CliError(f"cannot read the run log ({store!r}): {first}")


def read_runs(agent_id: str, limit: int, session: int | None) -> list[RunRecord]:
    """The newest `limit` run records (every attempt), oldest first (the latest
    ends up next to the prompt)."""
    store = open_store()
    try:
        runs = store.run_reads.list_runs(agent_id, limit=limit, session=session)
        return sorted(runs, key=lambda r: (r.run, r.attempt))
    except SQLAlchemyError as exc:
        raise _store_error(store, exc) from None
    finally:
        store.dispose()


def read_run(
    agent_id: str, run: int, attempt: int | None = None
) -> tuple[RunRecord, list[RunRecord], list[MessageRecord]]:
    """One attempt of a run (default: the latest), every attempt, and the run's messages."""
    store = open_store()
    try:
        attempts = store.run_reads.run_attempts(agent_id, run)
        if not attempts:
            raise CliError(f"agent {agent_id!r} has no run {run} in the run log")
        chosen = attempts[-1] if attempt is None else None
        for record in attempts:
            if record.attempt == attempt:
                chosen = record
        if chosen is None:
            raise CliError(
                f"run {run} of agent {agent_id!r} has no attempt {attempt} "
                f"(attempts: {', '.join(str(a.attempt) for a in attempts)})"
            )
        return chosen, attempts, store.messages.run_messages(agent_id, run)
    except SQLAlchemyError as exc:
        raise _store_error(store, exc) from None
    finally:
        store.dispose()


def run_label(run: RunRecord) -> str:
    """`#12` for a run's original execution, `#12 replay 2` for its second attempt."""
    return f"#{run.run}" if run.attempt == 1 else f"#{run.run} replay {run.attempt}"


def _duration(run: RunRecord) -> str:
    if run.ended_at is None:
        return "running"
    return fmt_duration((run.ended_at - run.started_at).total_seconds())


# Stop reasons of replies that ended as the model meant them to; any other
# (max_tokens, refusal, pause_turn, …) is shown as a badge in the run log.
_USUAL_STOPS = frozenset({"end_turn", "tool_use", "stop_sequence"})


def badges(run: RunRecord) -> list[str]:
    """The notes of a run in the log: no-op, skipped in prompt, fleet changes,
    $/h changes, unusual stop reasons, error."""
    notes: list[str] = []
    if run.noop:
        notes.append("[no-op]")
    if not run.in_prompt:
        notes.append("[skipped in prompt]")
    if run.mutating_calls:
        notes.append(f"[{run.mutating_calls} fleet change(s)]")
    if run.dph_added or run.dph_removed:
        notes.append(dph_change_text(run.dph_added, run.dph_removed))
    unusual = sorted(set(run.stop_reasons) - _USUAL_STOPS)
    if unusual:
        notes.append(f"[{', '.join(unusual)}]")
    if run.error:
        notes.append(f"error: {run.error.splitlines()[0][:80]}")
    return notes


def _badges(run: RunRecord) -> str:
    return " ".join(badges(run))


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def runs_table(runs: Sequence[RunRecord]) -> str:
    if not runs:
        return "no runs yet"
    rows = [
        [
            run_label(r),
            str(r.session),
            fmt_time(r.started_at),
            _duration(r),
            _clip(trigger_summary(r.triggers), _MAX_TRIGGERS_WIDTH),
            r.status.value,
            "—" if r.status == "running" else verdict_text(r.verdict, r.verdict_error),
            f"{r.usage.prompt_tokens}/{r.usage.output_tokens}",
            cached_share(r.usage),
            f"${r.cost_usd:.4f}",
            _badges(r),
        ]
        for r in runs
    ]
    headers = ["RUN", "SESSION", "STARTED", "DURATION", "TRIGGERS", "STATUS", "VERDICT"]
    return table([*headers, "PROMPT/OUT", "CACHED", "COST", "NOTES"], rows)


def read_session_totals(agent_id: str, session: int) -> LlmTotals:
    """The LLM totals of one session (each run once, by its latest finished attempt)."""
    store = open_store()
    try:
        return store.run_costs.llm_totals(agent_id, session=session)
    except SQLAlchemyError as exc:
        raise _store_error(store, exc) from None
    finally:
        store.dispose()


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


THINKING_SHOWN_CHARS = 4_000
"""The most of one thinking block's summarised text a transcript shows."""


def thinking_text(block: dict[str, Any]) -> str:
    """A thinking or redacted_thinking block as a transcript shows it: the
    summarised thinking (llm_thinking_display "summarized"), capped; or what
    stands in for it. The signature and encrypted data are never shown."""
    kept = block.get("settled_chars")
    if block.get("type") == "redacted_thinking":
        size = kept if isinstance(kept, int) else len(str(block.get("data", "")))
        return f"[thinking, redacted by the API: {size} characters]"
    text = str(block.get("thinking", "")).strip()
    if kept is not None and not text:
        return "[thinking, not shown: llm_thinking_display was omitted]"
    if kept is not None:
        head = "[thinking]"
    elif not block.get("signature"):
        head = "[thinking, cut off by the output limit]"
    elif not text:
        return "[thinking, not shown: llm_thinking_display is omitted]"
    else:
        head = "[thinking]"
    if len(text) > THINKING_SHOWN_CHARS:
        text = text[:THINKING_SHOWN_CHARS] + f"… [{len(text) - THINKING_SHOWN_CHARS} more]"
    return head + ("\n" + _indent(text, "  ") if text else "")


def message_text(m: MessageRecord) -> str:
    """A stored message as a human reads it; unparseable content is shown raw."""
    try:
        if m.kind == "assistant":
            reply = StoredReply.model_validate_json(m.content)
            parts = []
            for block in reply.content:
                if block.get("type") == "text":
                    parts.append(str(block.get("text", "")))
                elif block.get("type") == "tool_use":
                    args = json.dumps(block.get("input") or {}, ensure_ascii=False)
                    parts.append(f"→ {block.get('name')}({args})  [{block.get('id')}]")
                elif block.get("type") in ("thinking", "redacted_thinking"):
                    parts.append(thinking_text(block))
            u = reply.usage
            parts.append(
                f"(stop: {reply.stop_reason}; tokens in {u.input_tokens} · out {u.output_tokens}"
                + (f" ({u.thinking_tokens} thinking)" if u.thinking_tokens else "")
                + f" · cache read {u.cache_read_input_tokens} · cache write "
                f"{u.cache_creation_input_tokens} ({u.cache_creation_1h_input_tokens} for 1 h)"
                + (f"; model {reply.model}" if reply.model else "")
                + round_cost(reply)
                + f"; {reply.seconds:.1f}s)"
            )
            return "\n".join(parts)
        if m.kind == "tool_results":
            results = StoredToolResults.model_validate_json(m.content).results
            return "\n".join(
                f"← {r.name}{' [error]' if r.is_error else ''}  [{r.tool_use_id}]\n"
                + _indent(r.content, "  ")
                for r in results
            )
    except ValidationError:
        pass
    return m.content


def _attempts_line(run: RunRecord, attempts: Sequence[RunRecord]) -> str:
    parts = []
    for a in attempts:
        this = " (shown)" if a.attempt == run.attempt else ""
        parts.append(f"{a.attempt} {a.status.value} {fmt_time(a.started_at)}{this}")
    return (
        "  attempts:  "
        + " · ".join(parts)
        + " — executed again after a reset; the messages below are shared"
    )


def run_detail(
    run: RunRecord, messages: Sequence[MessageRecord], attempts: Sequence[RunRecord] = ()
) -> str:
    """The audit view: the record, the trigger block and every stored message."""
    usage = run.usage
    head = [
        f"run {run_label(run)} of {run.agent_id} · session {run.session} · {run.status.value}"
        + (f" · {_badges(run)}" if _badges(run) else ""),
        f"  started:   {fmt_time(run.started_at)} · ended {fmt_time(run.ended_at)}"
        f" · took {_duration(run)}",
        f"  verdict:   {verdict_text(run.verdict, run.verdict_error)}",
        f"  in prompt: {'yes' if run.in_prompt else 'no (skipped in prompt)'}",
        f"  work:      {run.rounds} round(s), {run.tool_calls} tool call(s), "
        f"{run.mutating_calls} fleet change(s), LLM {run.llm_seconds:.1f}s, "
        f"tools {run.tool_seconds:.1f}s",
        f"  fleet $/h: +{run.dph_added:.3f} rented, −{run.dph_removed:.3f} released",
        f"  stops:     {', '.join(run.stop_reasons) or '—'}",
        f"  tokens:    in {usage.input_tokens} · out {usage.output_tokens}"
        + (f" ({usage.thinking_tokens} thinking)" if usage.thinking_tokens else "")
        + " · "
        f"cache read {usage.cache_read_input_tokens} · "
        f"cache write {usage.cache_creation_input_tokens} "
        f"({usage.cache_creation_1h_input_tokens} for 1 h)",
        f"  LLM cost:  ${run.cost_usd:.4f}" + (f" ({run.model})" if run.model else ""),
        f"  context:   {run.history_runs_included} earlier run(s) in prompt, "
        f"{run.history_runs_dropped} dropped, ~{run.estimated_prompt_tokens} tokens",
    ]
    if len(attempts) > 1:
        head.append(_attempts_line(run, attempts))
    if run.error:
        head.append(f"  error:     {run.error}")
    sections = ["\n".join(head), "── triggers\n" + _indent(run.trigger_block)]
    for m in messages:
        flag = " · in prompt" if m.in_prompt else ""
        title = (
            f"── #{m.seq} round {m.round} · {m.role} · {m.kind}{flag} · {fmt_time(m.created_at)}"
        )
        sections.append(title + "\n" + _indent(message_text(m)))
    if not messages:
        sections.append("── no messages stored for this run")
    if run.actions_digest:
        sections.append("── fleet changes\n" + _indent(run.actions_digest))
    return "\n\n".join(sections)
