"""AgentRunWorkflow: one run of the agent, as a child of FleetAgentWorkflow.

load_context → call_llm ⇄ tools → record_run. The history of this workflow
carries IDs and decisions (tool calls with their inputs, stop reasons, usage,
each fleet tool result's one-line status and figures) and the run's input
(triggers with message previews, config, wakes); the prompt, the replies and
the fleet tools' texts live in the store, written by activities. The local
tools' short answers (wakes, known demand events), error results made here
the final answer's first 200 characters (for the Web UI) and, in a run that
took an operator's message, the answer itself cut at ASK_ANSWER_CHARS (for the
agent's `ask` update) are the exceptions.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure helpers; reloading them per
    # workflow run would only cost time and break isinstance checks.

    from fleet_agent.llm.request import longest_reply
    from fleet_agent.llm.timing import LLM_HEARTBEAT_TIMEOUT, llm_attempt_timeout
    from fleet_agent.llm.tools import (
        FLEET_TOOLS,
        MUTATING_TOOLS,
    )
    from fleet_agent.llm.verdict import judge
    from fleet_agent.loop.pace import usd
    from fleet_agent.models import (
        APPROVAL_DECIDED,
        ASK_ANSWER_CHARS,
        ApprovalDecision,
        ContextInfo,
        FleetToolRequest,
        LlmRequest,
        LoadContextRequest,
        RecordRunRequest,
        RequestLayout,
        RunInput,
        RunResult,
        RunStatus,
        StoreToolResults,
        ToolCall,
        ToolResult,
        TriggerKind,
    )
    from fleet_agent.notify.run_notices import MAX_NOTICES, run_notices
    from fleet_agent.visibility.details import run_details
    from workflows import stubs
    from workflows.metrics import record_tool_results
    from workflows.policies import (
        FLEET_HEARTBEAT_TIMEOUT,
        FLEET_READ_TIMEOUT,
        FLEET_RETRY,
        FLEET_WRITE_TIMEOUT,
        LLM_RETRY,
        STORE_RETRY,
        STORE_TIMEOUT,
    )
    from workflows.run_approvals import ApprovalWaiter
    from workflows.run_compact import compact_if_due
    from workflows.run_events import EventTools
    from workflows.run_texts import (
        COMPLETE,
        CUT_TEXT,
        MAX_TRUNCATIONS,
        WINDOW_EXCEEDED,
        approved_note,
        describe,
        not_approved,
        not_run,
        tool_summary,
        window_error,
    )
    from workflows.run_wakes import WakeTools
    from workflows.search_attributes import PATCH as SEARCH_ATTRIBUTES_PATCH
    from workflows.search_attributes import run_result_updates

__all__ = ["AgentRunWorkflow"]

# Histories recorded before a reply that filled the context window was its
# own case took it as a truncation.
WINDOW_FOLD_PATCH = "context-window-fold"
# Histories recorded before an approval carried its price: the grant went to
# the tool without it, and a second ask was a denial.
APPROVED_PRICE_PATCH = "approval-carries-price"
#: How often one tool call may ask an operator (its price rising each time).
MAX_ASKS_PER_CALL = 3


@workflow.defn
class AgentRunWorkflow:
    """One agent run.

    Touches, through activities: the store (context, replies, tool results, the
    run record), the LLM provider, and the fleet (vast.ai) for fleet tools.
    Wake decisions are made here and handed back to the parent, which owns the
    wakes. The workflow never fails on an LLM or tool error: the run is
    recorded as failed and the parent's loop goes on.
    """

    def __init__(self) -> None:
        self._round = 0
        self._step = "starting"

    @workflow.query
    def progress(self) -> str:
        """Where this run is: for `temporal workflow query` while it runs."""
        return f"round {self._round}: {self._step}"

    @workflow.signal(name=APPROVAL_DECIDED)
    def approval_decided(self, decision: ApprovalDecision) -> None:
        """An operator's decision on this run's pending approval, forwarded by
        the agent (its `decide_approval` update) or sent by its `freeze`."""
        self._approvals.hear(decision)

    @workflow.run
    async def run(self, inp: RunInput) -> RunResult:
        started = workflow.now()
        self._inp = inp
        self._approvals = ApprovalWaiter(inp)
        self._wake_tools = WakeTools(inp, workflow.now)
        self._event_tools = EventTools(inp, workflow.now)
        result = RunResult(run=inp.run, status=RunStatus.RUNNING, started_at=started)
        context: ContextInfo | None = None
        final_round: int | None = None
        self._step = "loading context"
        try:
            context = await workflow.execute_activity(
                stubs.load_context,
                LoadContextRequest(
                    run_input=inp,
                    started_at=started,
                    workflow_run_id=workflow.info().run_id,
                ),
                start_to_close_timeout=STORE_TIMEOUT,
                # It also reads the fleet (vast.ai), which may be slow.
                heartbeat_timeout=FLEET_HEARTBEAT_TIMEOUT,
                retry_policy=STORE_RETRY,
                summary=f"load context of run {inp.run}",
            )
            result.spend = context.spend
            result.llm_cost = context.llm_cost
            await compact_if_due(inp, context)
            final_round = await self._converse(result)
        except ActivityError as exc:
            result.status = RunStatus.FAILED
            result.error = describe(exc)
            workflow.logger.warning("run %s failed: %s", inp.run, result.error)
        result.demand_events = self._event_tools.added
        judge(result, self._inp.triggers)
        # Served by a query, never written to history (the answer's preview
        # is in the result anyway).
        workflow.set_current_details(run_details(result))
        result.wake_requests = self._wake_tools.requests
        result.ended_at = workflow.now()
        self._step = "recording"
        cost = await workflow.execute_activity(
            stubs.record_run,
            RecordRunRequest(
                agent_id=inp.agent_id,
                session=inp.session,
                # The spend and LLM cost summaries ride back to the agent only:
                # record_run reads neither, so history need not carry them twice.
                result=result.model_copy(update={"spend": None, "llm_cost": None}),
                final_round=final_round,
                context=None
                if context is None
                else context.model_copy(update={"spend": None, "llm_cost": None}),
                workflow_run_id=workflow.info().run_id,
            ),
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary=f"record run {inp.run} ({result.status.value})",
        )
        # For the agent's max_llm_usd_per_hour (no command: replays as before).
        result.cost_usd = usd(cost)
        if inp.search_attributes and workflow.patched(SEARCH_ATTRIBUTES_PATCH):
            # For the Web UI's list: `RunVerdictAction = true` finds runs that acted.
            workflow.upsert_search_attributes(run_result_updates(result))
        return result

    async def _converse(self, result: RunResult) -> int | None:
        """LLM rounds until a final message; returns its round, or None.

        Every stop reason is handled as the Messages API documents it: tool
        calls run only from a complete reply; a reply cut off by `max_tokens`
        (or any other truncation) runs none of its calls and the model is
        asked to go on, once; `pause_turn` is continued by sending the paused
        reply back (with a note: fleet_agent/llm/transcript.py); `refusal` ends the
        run without acting; `model_context_window_exceeded` folds the run so
        far into a digest and asks again, once.
        """
        inp = self._inp
        truncations = 0
        window_folds = 0
        layout = RequestLayout()
        # Thinking counts against the reply's max_tokens: the attempt's time
        # allows for the most a thinking model may write at this effort.
        budget = longest_reply(inp.config.max_output_tokens, inp.config.llm_effort)
        # A run that took an operator's message brings its answer back (an
        # `ask` may wait for it); others only its preview.
        reply_chars = (
            ASK_ANSWER_CHARS
            if any(t.kind == TriggerKind.HUMAN_MESSAGE for t in inp.triggers)
            else 0
        )
        for rnd in range(1, inp.config.max_rounds + 1):
            self._round, self._step = rnd, "waiting for the LLM"
            reply = await workflow.execute_activity(
                stubs.call_llm,
                LlmRequest(
                    agent_id=inp.agent_id,
                    run=inp.run,
                    session=inp.session,
                    round=rnd,
                    config=inp.config,
                    layout=layout,
                    reply_chars=reply_chars,
                ),
                start_to_close_timeout=llm_attempt_timeout(budget),
                heartbeat_timeout=LLM_HEARTBEAT_TIMEOUT,
                retry_policy=LLM_RETRY,
                summary=f"LLM round {rnd} of run {inp.run}",
            )
            result.rounds = rnd
            result.usage = result.usage + reply.usage
            result.llm_seconds += reply.seconds
            result.stop_reasons.append(reply.stop_reason)
            stop = reply.stop_reason
            layout = reply.layout
            if stop == "refusal":
                result.status = RunStatus.FAILED
                result.error = (
                    "the model declined to answer (stop_reason refusal); "
                    f"none of its {len(reply.tool_calls)} tool call(s) ran"
                )
                return None
            if stop == WINDOW_EXCEEDED and workflow.patched(WINDOW_FOLD_PATCH):
                # Not a truncation: the prompt and the reply filled the model's
                # window. None of its calls run; the run so far is folded.
                window_folds += 1
                if window_folds > 1:
                    result.status = RunStatus.FAILED
                    result.error = window_error(inp.config, rnd)
                    return None
                self._step = "folding the run after the context window filled"
                layout = layout.model_copy(update={"folded_upto": rnd})
                continue
            if stop == "pause_turn":
                # The API paused a long turn: sending the reply back as the last
                # message lets the model continue it (no user message between).
                self._step = "continuing a paused turn"
                continue
            complete = stop in COMPLETE
            if not complete:
                truncations += 1
                if truncations > MAX_TRUNCATIONS:
                    result.status = RunStatus.FAILED
                    result.error = (
                        f"the reply was cut off again (stop_reason {stop}, max_output_tokens "
                        f"{inp.config.max_output_tokens}); raise max_output_tokens"
                    )
                    return None
            if not reply.tool_calls:
                if complete:
                    result.status = RunStatus.OK
                    result.verdict, result.verdict_error = reply.verdict, reply.verdict_error
                    result.answer = reply.answer
                    result.reply, result.reply_cut = reply.reply, reply.reply_cut
                    return rnd
                await self._store_results(rnd, [], note=CUT_TEXT)
                continue
            if complete:
                self._step = f"{len(reply.tool_calls)} tool call(s)"
                outcomes = [await self._tool(rnd, call, result) for call in reply.tool_calls]
            else:
                outcomes = [not_run(call, stop) for call in reply.tool_calls]
            record_tool_results(inp.agent_id, outcomes)
            result.tool_calls += sum(1 for o in outcomes if not o.not_run)
            result.mutating_calls += sum(1 for o in outcomes if o.mutating)
            result.dph_added += sum(o.dph_delta for o in outcomes if o.dph_delta > 0)
            result.dph_removed -= sum(o.dph_delta for o in outcomes if o.dph_delta < 0)
            # For the agent to notify (no command: replays as before).
            notices = run_notices(outcomes)
            result.notices = [*result.notices, *notices][:MAX_NOTICES]
            await self._store_results(rnd, outcomes)
        result.status = RunStatus.MAX_ROUNDS
        result.verdict_error = f"no final message after {inp.config.max_rounds} rounds"
        return None

    async def _store_results(self, rnd: int, outcomes: list[ToolResult], note: str = "") -> None:
        """The user message that answers round `rnd`: tool results and/or a note."""
        inp = self._inp
        await workflow.execute_activity(
            stubs.store_tool_results,
            StoreToolResults(
                agent_id=inp.agent_id, run=inp.run, round=rnd, results=outcomes, note=note
            ),
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary=f"store {len(outcomes)} tool result(s) of round {rnd}"
            + (" and a note" if note else ""),
        )

    async def _tool(self, rnd: int, call: ToolCall, result: RunResult) -> ToolResult:
        """Run one tool call; every failure becomes an error result for the model."""
        if call.name == "schedule_next_check":
            return self._wake_tools.schedule(call)
        if call.name == "cancel_wake":
            return self._wake_tools.cancel(call)
        if call.name == "expect_demand":
            return self._event_tools.expect(call)
        if call.name not in FLEET_TOOLS:
            return ToolResult(
                tool_use_id=call.id,
                name=call.name,
                content=f"Unknown tool {call.name!r}.",
                is_error=True,
            )
        outcome = await self._fleet_call(rnd, call, result)
        if outcome.approval is None:
            return outcome
        # The change needs an operator's say: ask, wait, then call again
        # with the decision (the tool still checks every other guardrail).
        pending_step = self._step
        for asked in range(1, MAX_ASKS_PER_CALL + 1):
            ask = outcome.approval
            self._step = f"waiting for an operator's approval of {tool_summary(call)}"
            decision = await self._approvals.ask(call, ask)
            self._step = pending_step
            if not decision.approve:
                return not_approved(call, decision, ask.reason)
            # The grant names the price approved: a create whose offer costs
            # more by now asks again rather than renting (issue 42).
            priced = workflow.patched(APPROVED_PRICE_PATCH)
            grant = decision.model_copy(update={"approved_dph": ask.dph}) if priced else decision
            outcome = await self._fleet_call(rnd, call, result, grant)
            if outcome.approval is None:
                # The note goes before the journalled text when the round is stored.
                return outcome.model_copy(update={"preface": approved_note(decision)})
            if not priced or asked == MAX_ASKS_PER_CALL:
                break  # a tool that asks again and again: never act on it
        assert outcome.approval is not None
        return not_approved(call, decision, outcome.approval.reason)

    async def _fleet_call(
        self, rnd: int, call: ToolCall, result: RunResult, grant: ApprovalDecision | None = None
    ) -> ToolResult:
        """One fleet tool activity; a failure becomes an error result. Its time,
        by the workflow's clock, adds to the run's `tool_seconds`."""
        inp = self._inp
        mutating = call.name in MUTATING_TOOLS
        started = workflow.now()
        try:
            return await workflow.execute_activity(
                stubs.FLEET_TOOL_ACTIVITIES[call.name],
                FleetToolRequest(
                    agent_id=inp.agent_id,
                    run=inp.run,
                    round=rnd,
                    tool_use_id=call.id,
                    name=call.name,
                    input=call.input,
                    config=inp.config,
                    approval=grant,
                    # The text stays in the journal: only a status line comes back.
                    slim=True,
                ),
                start_to_close_timeout=FLEET_WRITE_TIMEOUT if mutating else FLEET_READ_TIMEOUT,
                heartbeat_timeout=FLEET_HEARTBEAT_TIMEOUT,
                retry_policy=FLEET_RETRY,
                summary=tool_summary(call),
            )
        except ActivityError as exc:
            return ToolResult(
                tool_use_id=call.id,
                name=call.name,
                content=f"{call.name} failed: {describe(exc)}",
                is_error=True,
            )
        finally:
            result.tool_seconds += (workflow.now() - started).total_seconds()
