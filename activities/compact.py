"""Compaction: fold the runs that leave the history window into the session summary.

`compact_session` asks the model to rewrite the summary when there is a
model, and falls back to the deterministic digest (fleet_agent/llm/compaction.py)
when there is none (autopilot), or when the model's call fails, times out or
returns more than the summary's cap. So it fails only when the store does;
and even then the prompt stays within budget (the window drops the runs; the
next run folds them).

`prompt_history` is what `load_context` and `call_llm` read: the session's
newest summary and the runs after it, never the whole session.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from temporalio import activity

from activities.heartbeat import heartbeating
from fleet_agent.llm.base import LlmError, LlmOptions, LlmProvider
from fleet_agent.llm.compaction import (
    FoldedAction,
    FoldedMessage,
    FoldedRun,
    digest,
    fold_point,
    history_share,
    summary_block,
    summary_body_cap,
)
from fleet_agent.llm.history import TrimmedHistory, entry_texts, history_messages
from fleet_agent.llm.model_table import ModelInfo
from fleet_agent.llm.prompt import estimate_tokens
from fleet_agent.llm.request import reply_budget
from fleet_agent.llm.tools import MUTATING_TOOLS
from fleet_agent.llm.transcript import StoredReply, StoredToolResults
from fleet_agent.models import CompactRequest, CompactResult, TriggerKind
from fleet_agent.store import HistoryEntry, Store, SummaryRecord

__all__ = [
    "SUMMARY_TIMEOUT_SECONDS",
    "CompactActivities",
    "PromptHistory",
    "prompt_history",
]

log = logging.getLogger(__name__)

SUMMARY_TIMEOUT_SECONDS = 60.0
"""The model gets this long to write the summary; then the digest writes it.
The activity's start-to-close (workflows/policies.py) leaves room for both."""

SUMMARY_OPTIONS = LlmOptions(effort="low")
"""A summary is a short rewrite: low effort, whatever the agent's, so the
model thinks little before it writes (thinking counts against max_tokens)."""

_INSTRUCTIONS = """You keep the rolling summary of a conversation between operators and an \
autonomous agent that manages a fleet of rented GPU machines. You get the summary so far and \
the runs that now leave the agent's context. Write the new summary: a list of short lines, \
oldest first. Keep every operator message's gist with its author, time and run number, every \
change to the fleet (tool, arguments, outcome), and every commitment the agent made. Drop \
routine checks. Answer with the summary only, at most {cap} tokens."""


@dataclass(frozen=True)
class PromptHistory:
    """The session's earlier runs as the prompt carries them."""

    summary: SummaryRecord | None
    history: TrimmedHistory
    # Runs before the window that the summary does not cover yet.
    unfolded: int

    @property
    def summary_text(self) -> str:
        s = self.summary
        return "" if s is None else summary_block(s.body, s.first_run, s.upto_run)


def prompt_history(
    store: Store, agent_id: str, session: int, run: int, history_token_budget: int
) -> PromptHistory:
    """Read the summary and the runs after it (blocking: call it in a thread).

    Reads the newest summary written by this run or an earlier one (every round
    of a run sees the same), and the in-prompt runs after it; the window of
    those fits `history_share` of the budget, next to a summary within its cap.
    """
    summary = store.summaries.latest_summary(agent_id, session, before_run=run + 1)
    after = summary.upto_run if summary is not None else 0
    entries = store.run_reads.prompt_history(agent_id, session, run, after_run=after)
    history = history_messages(entries, history_share(history_token_budget))
    return PromptHistory(summary, history, fold_point(entries, history_token_budget))


class CompactActivities:
    """Holds the store and the LLM provider (the summariser)."""

    def __init__(
        self,
        store: Store,
        provider: LlmProvider,
        timeout_seconds: float | None = None,
    ) -> None:
        self._store = store
        self._provider = provider
        # Read at construction, not definition, so tests can shorten it.
        self._timeout = SUMMARY_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds

    @activity.defn
    async def compact_session(self, req: CompactRequest) -> CompactResult:
        """Fold the runs that left the history window into a new version of the
        session's summary. Reads runs and messages from the store, may call the
        LLM provider (network) once, writes one `fa_summaries` row; a retry finds
        nothing left to fold. Returns what it folded."""
        async with heartbeating():
            return await self._compact(req)

    async def _compact(self, req: CompactRequest) -> CompactResult:
        store = self._store
        summary = await asyncio.to_thread(
            store.summaries.latest_summary, req.agent_id, req.session, req.run + 1
        )
        after = summary.upto_run if summary is not None else 0
        entries = await asyncio.to_thread(
            store.run_reads.prompt_history, req.agent_id, req.session, req.run, after
        )
        k = fold_point(entries, req.history_token_budget)
        if k == 0:
            return CompactResult()
        leaving = entries[:k]
        runs = await asyncio.to_thread(self._folded_runs, req.agent_id, leaving)
        previous = summary.body if summary is not None else ""
        cap = summary_body_cap(req.history_token_budget)
        body, reason = await self._summarise(previous, leaving, cap)
        source = "llm"
        if reason:
            source = "digest"
            body = digest(previous, runs, cap)
        record = await asyncio.to_thread(
            store.summaries.add_summary,
            SummaryRecord(
                agent_id=req.agent_id,
                session=req.session,
                made_by_run=req.run,
                first_run=summary.first_run if summary is not None else leaving[0].run,
                from_run=leaving[0].run,
                upto_run=leaving[-1].run,
                body=body,
                source=source,
                fallback_reason=reason,
                tokens=estimate_tokens(body),
                created_at=activity.info().started_time,
            ),
        )
        return CompactResult(
            folded_runs=k,
            upto_run=record.upto_run,
            source=record.source,
            fallback_reason=record.fallback_reason,
            tokens=record.tokens,
        )

    async def _summarise(
        self, previous: str, leaving: list[HistoryEntry], cap: int
    ) -> tuple[str, str]:
        """(the model's summary, "") or ("", why the digest must write it)."""
        if self._provider.name == "autopilot":
            return "", "no model (autopilot)"
        parts = [f"## Summary so far\n{previous or '(none)'}", "## Runs leaving the context"]
        for entry in leaving:
            user, answer = entry_texts(entry)
            parts.append(f"{user}\n[the agent answered]\n{answer}")
        # The summary's cap, plus room to think for a model that does.
        info: ModelInfo | None = getattr(self._provider, "info", None)
        max_tokens = reply_budget(info, max(cap, 1), SUMMARY_OPTIONS.effort)
        try:
            reply = await asyncio.wait_for(
                self._provider.complete(
                    system=_INSTRUCTIONS.format(cap=cap),
                    messages=[{"role": "user", "content": "\n\n".join(parts)}],
                    tools=[],
                    max_tokens=max_tokens,
                    options=SUMMARY_OPTIONS,
                ),
                timeout=self._timeout,
            )
        except TimeoutError:
            return "", f"the summariser timed out after {self._timeout:g}s"
        except LlmError as exc:
            log.warning("summariser failed, the digest writes the summary: %s", exc)
            return "", f"the summariser failed: {str(exc)[:200]}"
        body = reply.text.strip()
        if reply.stop_reason != "end_turn":
            # Cut off (while thinking or writing) or stopped for another
            # reason: what it wrote is not a whole summary.
            thinking = reply.usage.thinking_tokens
            return "", (
                f"the summariser stopped with {reply.stop_reason} at max_tokens {max_tokens}"
                + (f" ({thinking} tokens of thinking)" if thinking else "")
            )
        if not body:
            return "", "the summariser returned nothing"
        if estimate_tokens(body) > cap:
            return "", f"the summariser's {estimate_tokens(body)} tokens are over the cap {cap}"
        return body, ""

    def _folded_runs(self, agent_id: str, entries: list[HistoryEntry]) -> list[FoldedRun]:
        return [self._folded_run(agent_id, e) for e in entries]

    def _folded_run(self, agent_id: str, entry: HistoryEntry) -> FoldedRun:
        store = self._store
        record = store.run_reads.get_run(agent_id, entry.run)
        messages = [
            FoldedMessage(t.author or "operator", t.received_at, t.text)
            for t in (record.triggers if record is not None else [])
            if t.kind == TriggerKind.HUMAN_MESSAGE
        ]
        calls: dict[str, tuple[str, dict[str, object]]] = {}
        actions: list[FoldedAction] = []
        for m in store.messages.run_messages(agent_id, entry.run):
            if m.kind == "assistant":
                for b in StoredReply.model_validate_json(m.content).content:
                    if b.get("type") == "tool_use" and b.get("name") in MUTATING_TOOLS:
                        calls[str(b.get("id"))] = (str(b["name"]), dict(b.get("input") or {}))
            elif m.kind == "tool_results":
                for r in StoredToolResults.model_validate_json(m.content).results:
                    if r.tool_use_id in calls and not r.not_run:
                        tool, args = calls[r.tool_use_id]
                        outcome = (r.content.splitlines() or [""])[0]
                        actions.append(
                            FoldedAction(tool, args, ("refused: " if r.is_error else "") + outcome)
                        )
        return FoldedRun(entry.run, entry.started_at, entry.status == "failed", messages, actions)
