"""The LLM activity: one round of one run.

It receives (run, round), reads the prompt from the store, calls the provider,
stores the reply and returns only what the workflow decides on. A retry after
the reply was stored returns the stored reply instead of asking again, so a
run never gets two different answers for one round.
"""

from __future__ import annotations

import asyncio
import time

from temporalio import activity
from temporalio.exceptions import ApplicationError

from fleet_agent.llm.base import LlmError, LlmProvider
from fleet_agent.llm.temporal_errors import to_application_error
from fleet_agent.models import LlmRequest, LlmResult
from fleet_agent.prompt import history_messages, system_prompt
from fleet_agent.store import Store
from fleet_agent.tools import LOCAL_TOOLS, tool_schemas
from fleet_agent.transcript import (
    StoredReply,
    api_messages,
    assistant_seq,
    dumps,
    reply_text,
    tool_calls_of,
)
from fleet_agent.verdict import parse_verdict

__all__ = ["LlmActivities"]


def _result(reply: StoredReply, *, replayed: bool) -> LlmResult:
    calls = tool_calls_of(reply.content)
    verdict, error = (None, "") if calls else parse_verdict(reply_text(reply.content))
    return LlmResult(
        stop_reason=reply.stop_reason,
        tool_calls=calls,
        usage=reply.usage,
        verdict=verdict,
        verdict_error=error,
        seconds=reply.seconds,
        replayed=replayed,
    )


class LlmActivities:
    """Holds the provider (and its credentials, which stay in this process)."""

    def __init__(
        self, store: Store, provider: LlmProvider, tools: frozenset[str] = LOCAL_TOOLS
    ) -> None:
        self._store = store
        self._provider = provider
        self._tools = tools

    @activity.defn
    async def call_llm(self, req: LlmRequest) -> LlmResult:
        """Read the prompt of (run, round) from the store, call the LLM provider
        (network), store its reply; returns tool calls, stop reason and usage."""
        store = self._store
        seq = assistant_seq(req.round)
        stored = await asyncio.to_thread(store.get_message, req.agent_id, req.run, seq)
        if stored is not None:
            return _result(StoredReply.model_validate_json(stored.content), replayed=True)

        entries = await asyncio.to_thread(store.prompt_history, req.agent_id, req.session, req.run)
        history = history_messages(entries, req.config.history_token_budget)
        rows = await asyncio.to_thread(store.run_messages, req.agent_id, req.run)
        current = api_messages([(m.seq, m.content) for m in rows if m.seq < seq])
        if not current:
            raise ApplicationError(
                f"run {req.run} has no context message; load_context must run first",
                type="LlmPermanent",
                non_retryable=True,
            )
        started = time.monotonic()
        try:
            reply = await self._provider.complete(
                system=system_prompt(req.agent_id, req.config),
                messages=history.messages + current,
                tools=tool_schemas(self._tools),
                max_tokens=req.config.max_output_tokens,
            )
        except LlmError as exc:
            raise to_application_error(exc) from None
        record = StoredReply(
            content=reply.content,
            stop_reason=reply.stop_reason,
            usage=reply.usage,
            model=reply.model,
            seconds=round(time.monotonic() - started, 3),
        )
        inserted = await asyncio.to_thread(
            store.add_message,
            req.agent_id,
            req.run,
            seq,
            req.round,
            "assistant",
            "assistant",
            dumps(record),
            activity.info().started_time,
        )
        if not inserted:
            # Another attempt stored its reply first: that one is the answer.
            again = await asyncio.to_thread(store.get_message, req.agent_id, req.run, seq)
            if again is not None:
                return _result(StoredReply.model_validate_json(again.content), replayed=True)
        return _result(record, replayed=False)
