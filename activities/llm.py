"""The LLM activity: one round of one run.

It receives (run, round), reads the prompt from the store, calls the provider,
stores the reply and returns only what the workflow decides on. A retry after
the reply was stored returns the stored reply instead of asking again, so a
run never gets two different answers for one round.

A reply is paid for once, even when storing it fails. The attempt heartbeats
from its start (a slow first token is not a dead worker) and as the reply
streams in. Once the reply is complete it goes into the heartbeat details
*before* the store write; a later attempt that finds it in
`activity.info().heartbeat_details` stores that reply instead of calling the
model again. How the details reach that attempt (temporalio 1.35, sdk-core):

- the attempt fails with an exception (the store is down): the Python SDK
  hands every `heartbeat()` to core before it reports the failure, and core
  keeps the most recent details, sent to the server or still held back by its
  heartbeat throttling, and puts them in the RespondActivityTaskFailed request
  (`last_heartbeat_details`). The server gives them to the next attempt.
  Proven on a real Temporal server by
  tests/llm/test_llm_heartbeat_reuse.py::test_store_failure_after_the_answer_*;
- the worker dies: only what core had already sent survives. The first
  heartbeat of an attempt is sent at once, later ones at most every 0.8 ×
  heartbeat timeout, so a reply that arrives within that window of the
  previous send can be lost with the worker, and the next attempt asks again;
- the attempt times out (heartbeat or start-to-close): the server's timeout
  failure carries the last details it received, so a reply in them also
  reaches workflow history inside that failure. LLM text is otherwise kept
  out of history.

The reply kept in the details has its thinking blocks exactly as the API gave
them, so a resumed attempt stores what the next round must echo. A reply
larger than `HEARTBEAT_REPLY_MAX_BYTES` (a long summarised thinking at a high
effort) is not put in the details: they would cross Temporal's payload
limits, and a reply lost with its worker is only asked again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.compact import prompt_history
from activities.heartbeat import beat, heartbeating
from activities.llm_errors import to_application_error
from fleet_agent.llm.base import LlmError, LlmOptions, LlmProvider, TokenCounter
from fleet_agent.llm.model_table import ModelInfo, context_window
from fleet_agent.llm.prompt import system_prompt
from fleet_agent.llm.prompt_cache import CachedRequest, cached_request
from fleet_agent.llm.request import reply_budget
from fleet_agent.llm.request_fit import RequestTooLarge, cut_context, fit_request
from fleet_agent.llm.token_count import RequestTokens
from fleet_agent.llm.tools import LOCAL_TOOLS, offered_tools, tool_schemas
from fleet_agent.llm.transcript import (
    CONTEXT_SEQ,
    StoredReply,
    api_messages,
    assistant_seq,
    dumps,
    reply_text,
    tool_calls_of,
)
from fleet_agent.llm.verdict import answer_preview, parse_verdict, strip_verdict
from fleet_agent.models import LlmRequest, LlmResult, RequestLayout
from fleet_agent.store import Store

__all__ = [
    "HEARTBEAT_REPLY_MAX_BYTES",
    "PROGRESS_BEAT_SECONDS",
    "LlmActivities",
    "LlmHeartbeat",
    "llm_options",
]

HEARTBEAT_REPLY_MAX_BYTES = 256 * 1024
"""The largest reply (its JSON) kept in heartbeat details; Temporal warns at
512 KB per payload and refuses 2 MB."""

PROGRESS_BEAT_SECONDS = 1.0
"""At most one heartbeat per second from stream progress (a long reply has
thousands of deltas); the background beat of `heartbeating()` covers silences."""


class LlmHeartbeat(BaseModel):
    """What `call_llm` heartbeats carry: progress, and the reply once it is complete."""

    output_chars: int = 0
    reply: StoredReply | None = None


def _reply_in(details: Sequence[Any]) -> StoredReply | None:
    """The reply an earlier attempt of this activity put in its heartbeat, if any."""
    if not details:
        return None
    try:
        return LlmHeartbeat.model_validate(details[0]).reply
    except ValidationError:
        return None  # details of another shape (an older worker): ask again


def _result(reply: StoredReply, *, replayed: bool, reply_chars: int = 0) -> LlmResult:
    """What the run decides on; with `reply_chars`, the final text too, cut there."""
    calls = tool_calls_of(reply.content)
    text = "" if calls else reply_text(reply.content)
    verdict, error = (None, "") if calls else parse_verdict(text)
    answer = strip_verdict(text) if reply_chars else ""
    return LlmResult(
        stop_reason=reply.stop_reason,
        tool_calls=calls,
        usage=reply.usage,
        verdict=verdict,
        verdict_error=error,
        seconds=reply.seconds,
        replayed=replayed,
        answer=answer_preview(text),
        reply=answer[:reply_chars],
        reply_cut=len(answer) > reply_chars,
        layout=reply.layout,
    )


class _Beats:
    """The heartbeat details of one attempt, and progress beats, rate-limited."""

    def __init__(self) -> None:
        self.state = LlmHeartbeat()
        self._last = time.monotonic()

    def details(self) -> tuple[Any, ...]:
        return (self.state.model_dump(mode="json"),)

    def progress(self, output_chars: int) -> None:
        self.state.output_chars = output_chars
        now = time.monotonic()
        if now - self._last >= PROGRESS_BEAT_SECONDS:
            self._last = now
            beat(*self.details())

    def keep(self, reply: StoredReply) -> None:
        """Put the reply in the details and beat now, before anything can fail
        (a reply over `HEARTBEAT_REPLY_MAX_BYTES` stays out of them)."""
        if len(dumps(reply).encode()) <= HEARTBEAT_REPLY_MAX_BYTES:
            self.state.reply = reply
        self._last = time.monotonic()
        beat(*self.details())


def llm_options(req: LlmRequest) -> LlmOptions:
    """How the model of this run thinks: the run's config."""
    return LlmOptions(
        effort=req.config.llm_effort, thinking_display=req.config.llm_thinking_display
    )


class LlmActivities:
    """Holds the provider (and its credentials, which stay in this process)."""

    def __init__(
        self, store: Store, provider: LlmProvider, tools: frozenset[str] = LOCAL_TOOLS
    ) -> None:
        self._store = store
        self._provider = provider
        self._tools = tools
        # Counts requests near the window with count_tokens when the provider
        # can (token_count.py).
        self._tokens = RequestTokens(provider if isinstance(provider, TokenCounter) else None)
        self._window = context_window(getattr(provider, "model", None))
        # What the provider's model takes (thinking, effort, output); None
        # for a provider without a model table entry (the autopilot).
        self._info: ModelInfo | None = getattr(provider, "info", None)

    @activity.defn
    async def call_llm(self, req: LlmRequest) -> LlmResult:
        """Read the prompt of (run, round) from the store, call the LLM provider
        (network, streamed, heartbeating) with prompt-cache breakpoints on the
        prompt's stable parts, after measuring it (count_tokens near the
        window, when the provider has it) and condensing this run's older tool
        results if it is too long, store its reply with its usage (cache
        writes and reads included); returns tool calls, stop reason and usage.
        Reuses a reply found in the store or in an earlier attempt's heartbeat
        details instead of asking the model again."""
        beats = _Beats()
        async with heartbeating(details=beats.details):
            seq = assistant_seq(req.round)
            stored = await asyncio.to_thread(
                self._store.messages.get_message, req.agent_id, req.run, seq
            )
            if stored is not None:
                return _result(
                    StoredReply.model_validate_json(stored.content),
                    replayed=True,
                    reply_chars=req.reply_chars,
                )
            earlier = _reply_in(activity.info().heartbeat_details)
            if earlier is not None:
                # Paid for by an earlier attempt that could not store it. Kept in
                # this attempt's details too, in case storing fails again.
                beats.keep(earlier)
                return await self._store_reply(req, seq, earlier, replayed=True)
            record = await self._ask(req, seq, beats)
            beats.keep(record)
            return await self._store_reply(req, seq, record, replayed=False)

    async def _ask(self, req: LlmRequest, seq: int, beats: _Beats) -> StoredReply:
        store = self._store
        past = await asyncio.to_thread(
            prompt_history,
            store,
            req.agent_id,
            req.session,
            req.run,
            req.config.history_token_budget,
        )
        stored = await asyncio.to_thread(store.messages.run_messages, req.agent_id, req.run)
        rows = [(m.seq, m.content) for m in stored if m.seq < seq]
        if not rows or rows[0][0] != CONTEXT_SEQ:
            raise ApplicationError(
                f"run {req.run} has no context message; load_context must run first",
                type="LlmPermanent",
                non_retryable=True,
            )
        history = past.history.messages
        system = system_prompt(req.agent_id)
        tools = tool_schemas(offered_tools(self._tools, req.config.market_mode == "snark"))

        def build(layout: RequestLayout) -> CachedRequest:
            # Stable parts first, with cache breakpoints (fleet_agent/llm/prompt_cache.py).
            current = api_messages(rows, fold_upto=layout.folded_upto)
            return cached_request(
                system=system,
                tools=tools,
                history=history[layout.history_dropped :],
                current=cut_context(current, layout.context_keep),
                summary=past.summary_text,
            )

        options = llm_options(req)
        # Thinking counts against max_tokens: room for it, by effort.
        max_tokens = reply_budget(self._info, req.config.max_output_tokens, options.effort)
        # The whole request within the run's share and the model's window.
        try:
            fitted = await fit_request(
                build,
                previous=req.layout,
                rounds=req.round - 1,
                history_len=len(history),
                run_share=req.config.history_token_budget,
                window=self._window - max_tokens,
                tokens=self._tokens,
            )
        except RequestTooLarge as exc:
            raise ApplicationError(str(exc), type="LlmPermanent", non_retryable=True) from None
        request = fitted.request
        started = time.monotonic()
        try:
            reply = await self._provider.complete(
                system=request.system,
                messages=request.messages,
                tools=request.tools,
                max_tokens=max_tokens,
                on_progress=beats.progress,
                options=options,
            )
        except LlmError as exc:
            raise to_application_error(exc) from None
        return StoredReply(
            content=reply.content,
            stop_reason=reply.stop_reason,
            usage=reply.usage,
            model=reply.model,
            seconds=round(time.monotonic() - started, 3),
            layout=fitted.layout,
        )

    async def _store_reply(
        self, req: LlmRequest, seq: int, record: StoredReply, *, replayed: bool
    ) -> LlmResult:
        store = self._store
        inserted = await asyncio.to_thread(
            store.messages.add_message,
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
            again = await asyncio.to_thread(store.messages.get_message, req.agent_id, req.run, seq)
            if again is not None:
                return _result(
                    StoredReply.model_validate_json(again.content),
                    replayed=True,
                    reply_chars=req.reply_chars,
                )
        return _result(record, replayed=replayed, reply_chars=req.reply_chars)
