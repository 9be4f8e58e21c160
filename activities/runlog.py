"""Activities that read and write the run log in the store.

Each is idempotent on the store's natural keys, so Temporal may retry any of
them after a write went through without duplicating a row.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Protocol

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.compact import prompt_history
from activities.fleet_results import replay_note
from activities.heartbeat import heartbeating
from activities.metrics import record_run_cost
from activities.temporal import stash_unstored_messages
from fleet_agent.demand.point import DemandPoint
from fleet_agent.llm.model_table import KNOWN_MODELS, ModelInfo
from fleet_agent.llm.prompt import (
    context_message,
    estimate_tokens,
    render_trigger_block,
    system_prompt,
)
from fleet_agent.llm.tools import MUTATING_TOOLS
from fleet_agent.llm.transcript import (
    CONTEXT_SEQ,
    StoredReply,
    StoredToolResults,
    assistant_seq,
    dumps,
    notes_before_calls,
    reply_text,
    settled,
    tool_results_seq,
)
from fleet_agent.loop.triggers import inbox_item, message_key
from fleet_agent.market.point import MarketPoint
from fleet_agent.models import (
    AgentConfig,
    AgentCounters,
    ContextInfo,
    LoadContextRequest,
    RecordRunRequest,
    RunInput,
    SpendSummary,
    StoreToolResults,
    ToolResult,
    Trigger,
    TriggerKind,
)
from fleet_agent.store import Store, ToolJournal
from fleet_agent.store.accounting import replies_cost
from fleet_agent.store.demand_history import DemandHistory
from fleet_agent.store.market_history import MarketHistory

__all__ = ["FleetView", "NoFleet", "RunLogActivities"]


class FleetView(Protocol):
    """What a run's context needs to know about the fleet and what it costs."""

    async def snapshot_text(self, agent_id: str, config: AgentConfig) -> str: ...

    async def spend_summary(self, agent_id: str) -> SpendSummary | None: ...


class NoFleet:
    """Used when no fleet is connected: the loop still runs with local tools."""

    async def snapshot_text(self, agent_id: str, config: AgentConfig) -> str:
        return "No fleet is connected to this agent (fleet tools are unavailable)."

    async def spend_summary(self, agent_id: str) -> SpendSummary | None:
        return None


def _session_reason(inp: RunInput) -> str:
    """Why the session began, as far as its first run knows (kept on first write)."""
    for t in inp.triggers:
        if t.kind == TriggerKind.SESSION_RESET:
            return f"reset: {t.reason}"
    for t in inp.triggers:
        if t.kind == TriggerKind.AGENT_STARTED:
            return "agent started"
    return ""


class RunLogActivities:
    """Store-backed activities; the store calls run in threads (they block)."""

    def __init__(
        self,
        store: Store,
        fleet: FleetView | None = None,
        prices: Mapping[str, ModelInfo] = KNOWN_MODELS,
    ) -> None:
        self._store = store
        self._journal = ToolJournal(store)
        self._fleet: FleetView = fleet or NoFleet()
        # The price table (FLEET_LLM_PRICES applied) that record_run prices replies with.
        self._prices = prices

    @activity.defn
    async def load_agent_counters(self, agent_id: str) -> AgentCounters:
        """Read the highest run and session numbers of an agent from the store."""
        max_run, max_session = await asyncio.to_thread(
            self._store.run_reads.latest_counters, agent_id
        )
        return AgentCounters(max_run=max_run, max_session=max_session)

    @activity.defn
    async def load_context(self, req: LoadContextRequest) -> ContextInfo:
        """Open the run (an attempt of it) in the store and write its first message
        (triggers, target, fleet snapshot and spend, wakes). Reads message texts
        from the store's inbox (those not there yet from the agent, by its
        query, stored first: activities/temporal.py), the
        fleet (vast.ai, a recent listing when one is at hand) through the fleet
        view (which accrues a fresh one in the store's spend ledger) and the
        ledger's summary, which it returns for the agent's status, with the LLM
        cost today and over 24 h (run records); heartbeats while it waits on
        them."""
        async with heartbeating():
            return await self._load_context(req)

    async def _load_context(self, req: LoadContextRequest) -> ContextInfo:
        inp = req.run_input
        store = self._store
        triggers = await self._full_texts(inp.agent_id, inp.triggers)
        inp = inp.model_copy(update={"triggers": triggers})
        trigger_block = render_trigger_block(triggers)
        await asyncio.to_thread(
            store.sessions.ensure_session,
            inp.agent_id,
            inp.session,
            _session_reason(inp),
            req.started_at,
        )
        await asyncio.to_thread(
            store.run_writes.begin_run,
            inp.agent_id,
            inp.run,
            inp.session,
            triggers,
            trigger_block,
            req.started_at,
            req.workflow_run_id,
        )
        fleet_text = await self._fleet.snapshot_text(inp.agent_id, inp.config)
        demand = await asyncio.to_thread(self._latest_demand, inp.agent_id, inp.config)
        market = await asyncio.to_thread(self._latest_market, inp.agent_id, inp.config)
        spend = await self._fleet.spend_summary(inp.agent_id)
        if spend is not None:
            fleet_text += "\n" + spend.line(inp.config.daily_budget_usd)
        text = context_message(
            run=inp.run,
            session=inp.session,
            now=req.started_at,
            trigger_block=trigger_block,
            fleet_text=fleet_text,
            config=inp.config,
            wakes=inp.wakes,
            next_heartbeat_at=inp.next_heartbeat_at,
            demand=demand,
            market=market,
        )
        await asyncio.to_thread(
            store.messages.add_message,
            inp.agent_id,
            inp.run,
            CONTEXT_SEQ,
            0,
            "user",
            "context",
            text,
            req.started_at,
        )
        # The session's summary and the runs after it (activities/compact.py).
        past = await asyncio.to_thread(
            prompt_history,
            store,
            inp.agent_id,
            inp.session,
            inp.run,
            inp.config.history_token_budget,
        )
        history = past.history
        info = ContextInfo(
            history_runs_included=history.included,
            history_runs_dropped=history.dropped,
            estimated_prompt_tokens=history.tokens
            + estimate_tokens(past.summary_text)
            + estimate_tokens(text)
            + estimate_tokens(system_prompt(inp.agent_id)),
            compaction_due=past.unfolded > 0,
            spend=spend,
            llm_cost=await asyncio.to_thread(
                store.run_costs.llm_cost_summary, inp.agent_id, req.started_at
            ),
        )
        await asyncio.to_thread(
            store.run_writes.set_run_context, inp.agent_id, inp.run, info, req.workflow_run_id
        )
        return info

    def _latest_demand(self, agent_id: str, config: AgentConfig) -> DemandPoint | None:
        """The monitor's latest reading of demand, for `## Demand` (demand
        mode only: a fixed agent's message stays as it was). A row that no
        longer parses is logged and shown as no reading, never fails the run."""
        if config.target_mode != "demand":
            return None
        try:
            return DemandHistory(self._store).latest(agent_id)
        except ValidationError as exc:
            activity.logger.warning("demand point of %s unreadable: %s", agent_id, exc)
            return None

    def _latest_market(self, agent_id: str, config: AgentConfig) -> MarketPoint | None:
        """The monitor's latest reading of the business, for `## Market`
        (market mode only: with the market off the message stays as it was).
        A row that no longer parses is logged and shown as no reading."""
        if config.market_mode != "snark":
            return None
        try:
            return MarketHistory(self._store).latest(agent_id)
        except ValidationError as exc:
            activity.logger.warning("market point of %s unreadable: %s", agent_id, exc)
            return None

    async def _full_texts(self, agent_id: str, triggers: list[Trigger]) -> list[Trigger]:
        """`triggers` with each inbox text (`text_key`) in place of its preview.

        The run carries previews only. A text the store does not have yet
        (the agent's store loop has not written it: the run does not wait for
        it, workflows/agent_runs.py) is fetched by the loop's own path, the
        agent's `unstored_messages` query (`stash_unstored_messages`), and
        stored here; the loop's write of the same key is then a no-op."""
        keys = [t.text_key for t in triggers if t.text_key]
        if not keys:
            return triggers
        inbox = self._store.inbox
        found = await asyncio.to_thread(inbox.inbox_texts, agent_id, keys)
        why = ""
        if any(k not in found for k in keys):
            try:
                await stash_unstored_messages(self._store, agent_id)
            except Exception as exc:  # the agent is between executions, Temporal is away
                why = f": the agent's query failed ({type(exc).__name__}: {str(exc)[:200]})"
            found = await asyncio.to_thread(inbox.inbox_texts, agent_id, keys)
            # A run started by an agent of 0.2.0 or before carries such a text
            # whole, and its agent may have handed it over to none but the run
            # (docs/decisions/patches.md, run-carries-unstored-texts).
            whole = [
                inbox_item(t)
                for t in triggers
                if t.text_key not in found and message_key(t.seq, t.text) == t.text_key
            ]
            if whole:
                await asyncio.to_thread(inbox.stash_messages, agent_id, whole)
                found = {**found, **{i.key: i for i in whole}}
        missing = [k for k in keys if k not in found]
        if missing:
            # Retryable: the agent holds the texts until they are stored.
            raise ApplicationError(
                f"message text {missing[0]!r} of agent {agent_id!r} is not in the store's "
                f"inbox yet ({len(missing)} missing){why}",
                type="InboxTextMissing",
            )
        return [
            t.model_copy(update={"text": found[t.text_key].text}) if t.text_key else t
            for t in triggers
        ]

    @activity.defn
    async def store_tool_results(self, req: StoreToolResults) -> None:
        """Write the tool results of one round (one user message) to the store,
        each `stored` one with its full text read from the tool journal."""
        results = await asyncio.to_thread(self._full_results, req)
        await asyncio.to_thread(
            self._store.messages.add_message,
            req.agent_id,
            req.run,
            tool_results_seq(req.round),
            req.round,
            "user",
            "tool_results",
            dumps(StoredToolResults(results=results, note=req.note)),
            activity.info().started_time,
        )

    def _full_results(self, req: StoreToolResults) -> list[ToolResult]:
        """The round's results as the model reads them: the journal's text in
        place of a status line, after the replay note and the run's preface."""
        out = []
        for r in req.results:
            content = r.content
            if r.stored:
                record = self._journal.get(req.agent_id, r.tool_use_id)
                if record is None or record.result is None:
                    raise ApplicationError(
                        f"tool call {r.tool_use_id!r} of run {req.run} has no result in the "
                        "tool journal",
                        type="ToolResultMissing",
                    )
                content = record.result.content
                if r.replayed:
                    content = f"{replay_note(record)}\n{content}"
            if r.preface:
                content = f"{r.preface}\n{content}"
            out.append(r.model_copy(update={"content": content, "stored": False, "preface": ""}))
        return out

    @activity.defn
    async def record_run(self, req: RecordRunRequest) -> float:
        """Close the run in the store: status, verdict, usage, final text, digest,
        the $/hour its tool calls added and removed, and its LLM cost (every
        stored reply of the run at its model's price) and tools' seconds.
        Records that cost in the `fleet_run_llm_cost_usd` metric, once the
        record is closed (a retry after a failure before that counts once),
        and returns it: the agent holds runs past `max_llm_usd_per_hour`."""
        cost = await asyncio.to_thread(self._record_run, req)
        record_run_cost(req.agent_id, cost)
        return cost

    def _record_run(self, req: RecordRunRequest) -> float:
        """Close the record; returns the run's LLM cost in USD."""
        store, result = self._store, req.result
        final_seq = None if req.final_round is None else assistant_seq(req.final_round)
        final_text = ""
        digest: list[str] = []
        replies: list[StoredReply] = []
        notes: dict[str, str] = {}
        for message in store.messages.run_messages(req.agent_id, result.run):
            if message.kind == "assistant":
                replies.append(StoredReply.model_validate_json(message.content))
                notes.update(notes_before_calls(replies[-1].content))
                if message.seq == final_seq:
                    final_text = reply_text(replies[-1].content)
            if message.kind != "tool_results":
                continue
            for r in StoredToolResults.model_validate_json(message.content).results:
                if r.name in MUTATING_TOOLS and not r.is_error:
                    line = f"- {r.name}: {r.content.splitlines()[0][:200]}"
                    # What the model wrote before the call: Sonnet 5.5's text
                    # between tool calls, in a thinking block (transcript.py).
                    if note := notes.get(r.tool_use_id):
                        line += f" (your note before it: {note})"
                    digest.append(line)
        cost = replies_cost(replies, self._prices)
        try:
            self._finish(req, final_text, digest, replies, cost)
            if final_seq is not None:
                self._settle(req)
        except KeyError:
            # This execution of the run never got as far as load_context (e.g.
            # its workflow could not start): nothing to close, nothing written.
            raise ApplicationError(
                f"run {result.run} was never opened in the store"
                + (f" by workflow run {req.workflow_run_id}" if req.workflow_run_id else ""),
                type="RunNotOpened",
                non_retryable=True,
            ) from None
        return cost

    def _settle(self, req: RecordRunRequest) -> None:
        """A run with its final answer sends nothing more: its replies keep
        their thinking readable and capped, without the signatures only the
        API reads (fleet_agent/llm/transcript.py, `settled`). Idempotent."""
        store, run = self._store, req.result.run
        for message in store.messages.run_messages(req.agent_id, run):
            if message.kind != "assistant":
                continue
            reply = settled(StoredReply.model_validate_json(message.content))
            if reply is not None:
                store.messages.replace_message(req.agent_id, run, message.seq, dumps(reply))

    def _finish(
        self,
        req: RecordRunRequest,
        final_text: str,
        digest: list[str],
        replies: list[StoredReply],
        cost: float,
    ) -> None:
        """The record's one write (the context with it); `KeyError` if the
        attempt was never opened."""
        result = req.result
        self._store.run_writes.finish_run(
            req.agent_id,
            result.run,
            status=result.status,
            verdict=result.verdict,
            verdict_error=result.verdict_error,
            noop=result.noop,
            in_prompt=result.in_prompt,
            error=result.error,
            final_text=final_text,
            actions_digest="\n".join(digest),
            mutating_calls=result.mutating_calls,
            tool_calls=result.tool_calls,
            rounds=result.rounds,
            stop_reasons=result.stop_reasons,
            usage=result.usage,
            llm_seconds=result.llm_seconds,
            dph_added=result.dph_added,
            dph_removed=result.dph_removed,
            cost_usd=cost,
            tool_seconds=result.tool_seconds,
            model=replies[-1].model if replies else "",
            ended_at=result.ended_at or activity.info().started_time,
            workflow_run_id=req.workflow_run_id,
            context=req.context,
        )
