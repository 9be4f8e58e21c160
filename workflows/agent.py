"""FleetAgentWorkflow: the long-lived, one-per-fleet agent loop.

wait → debounce → run (a child workflow) → repeat, continuing as new when the
history grows. Everything that made home-made loops misbehave is state here,
changed only inside workflow tasks: pending triggers, wakes, the run counter,
the session number. Runs execute one after another by construction — the loop
waits for each run before it looks for the next trigger, even across a
continue-as-new in the middle of a run.

Nothing that arrives can hurt it: every signal is parsed from loose JSON into
a model or a visible refusal, costs O(1), and is bounded in what it leaves in
state (fleet_agent/loop/triggers.py); the history is handed to a new execution as
soon as it grows large, whatever phase the loop is in.

Every handler is declared here, with what it decides; the loop and the
effects every handler shares are in its base, `AgentLoop`
(workflows/agent_loop.py). The work is done by helpers, one module per
concept, each owning its slice of the state and returning what changed
(docs/decisions/workflow-helpers.md): the execution's state and shared rules
(workflows/agent_state.py), the intake of signals (agent_inputs.py), the
config (agent_config.py), approvals (agent_approvals.py), the kill switch
(agent_freeze.py), runs and the store loop (agent_runs.py), the monitor
(agent_monitor.py), notifications (agent_notify.py) and the paces
(agent_pace.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models, pure helpers and the loop's module.
    from fleet_agent.loop.inputs import parse_config_patch, parse_payload
    from fleet_agent.loop.triggers import Refusal
    from fleet_agent.loop.wakes import cancel_wake as remove_wake
    from fleet_agent.models import (
        APPROVAL_CLOSED,
        APPROVAL_REQUESTED,
        DEMAND_TARGET,
        AgentConfig,
        AgentStatus,
        ApprovalClosed,
        ApprovalDecisionRequest,
        ApprovalOutcome,
        AskRequest,
        AskResult,
        CancelWake,
        DemandTargetChange,
        FreezeInfo,
        FreezeReport,
        FreezeRequest,
        HumanMessage,
        InboxItem,
        PendingApproval,
        ResetSession,
        StateChanged,
        TriggerNow,
        UnfreezeRequest,
    )
    from workflows.agent_approvals import approval_facts, tell_run
    from workflows.agent_ask import no_answer_now, refused
    from workflows.agent_loop import AgentLoop

__all__ = ["FleetAgentWorkflow"]


@workflow.defn
class FleetAgentWorkflow(AgentLoop):
    """The agent of one fleet (workflow ID = agent ID).

    Touches: its child runs (AgentRunWorkflow, ID `<agent>/run-<n>`), its
    monitor (`<agent>/monitor`), the run waiting for an approval (the
    decision, by signal), and through activities the store (run
    numbering and the last known config on a fresh start, the config as it
    changes, operator message texts, runs lost to a timeout) and the Temporal
    client (a run handed over by continue-as-new, how the previous execution
    ended).
    Signals: human_message, state_changed, trigger_now, reset_session,
    cancel_wake, from its runs approval_requested / approval_closed, and
    from its monitor demand_target (any other name is refused visibly);
    updates: update_config, freeze, unfreeze, decide_approval, ask; queries:
    status, live_config. It never fails: a failed run is recorded and the
    loop goes on.
    """

    @workflow.init
    def __init__(self, raw: Any = None) -> None:
        self._compose(raw)

    @workflow.run
    async def run(self, raw: Any = None) -> None:
        await self._loop()

    # ------------------------------------------------------------ signals
    # Each is parsed from loose JSON into a model or a visible refusal
    # (status.rejected, `AgentLoop._accept`).

    @workflow.signal(
        description='P0: a message from the operator, {"text": str, "author": str, '
        '"message_id": str (optional, the sender\'s)} or a bare string'
    )
    def human_message(self, raw: Any) -> None:
        """P0: the operator talks to the agent. `{"text", "author"}` or a bare string."""
        msg = self._accept("human_message", raw, HumanMessage, bare="text")
        if msg is not None:
            taken = self._intake.message(msg)
            self._offered("human_message", taken if isinstance(taken, Refusal) else None, raw)

    @workflow.signal(
        description='P1: {"instance_id", "old_state", "new_state", "detail"}; sent by the monitor'
    )
    def state_changed(self, raw: Any) -> None:
        """P1: an instance changed state (sent by the fleet monitor); coalesced per instance."""
        change = self._accept("state_changed", raw, StateChanged)
        if change is not None:
            refusal, moves_due = self._intake.state_change(change)
            # A folded change moves no debounce window: the due time stands,
            # and a flood skips recomputing it for every signal.
            self._offered("state_changed", refusal, raw, wake=moves_due)

    @workflow.signal(
        description='P0: run as soon as the 2 s window allows; {"reason": str} optional'
    )
    def trigger_now(self, raw: Any = None) -> None:
        """P0: run as soon as the P0 window allows. Argument optional."""
        req = self._accept("trigger_now", raw, TriggerNow, bare="reason", optional=True)
        if req is not None:
            self._offered("trigger_now", self._intake.trigger_now(req.reason), raw)

    @workflow.signal(
        description="new conversation after the current run; counters, wakes, triggers kept"
    )
    def reset_session(self, raw: Any = None) -> None:
        """Start a new conversation after the current run; counters, wakes and
        pending triggers carry over."""
        req = self._accept("reset_session", raw, ResetSession, bare="reason", optional=True)
        if req is not None:
            self._ex.ask_reset(req.reason)

    @workflow.signal(description='drop a pending wake: {"wake_id": str}')
    def cancel_wake(self, raw: Any) -> None:
        """Drop one pending wake by id."""
        req = self._accept("cancel_wake", raw, CancelWake, bare="wake_id")
        if req is None:
            return
        state = self._ex.state
        state.wakes, existed = remove_wake(state.wakes, req.wake_id)
        if not existed:
            self._intake.reject("cancel_wake", f"no pending wake {req.wake_id!r}", raw)
        self._wake()

    @workflow.signal(
        name=DEMAND_TARGET,
        description="internal: the monitor's new target in demand mode (target_mode demand)",
    )
    def demand_target(self, raw: Any) -> None:
        """The monitor's new target in demand mode: held from now, clamped to
        [min_target, max_target], and told to the next run as a config
        change with the rule's reason; past max_demand_changes_per_hour it
        waits (workflows/agent_pace.py). Refused (status.rejected) when the
        agent is not in demand mode or is frozen."""
        change = self._accept(DEMAND_TARGET, raw, DemandTargetChange)
        if change is None:
            return
        config = self._keeper.config
        if config.target_mode != "demand":
            self._intake.reject(DEMAND_TARGET, "not in demand mode (target_mode is fixed)", raw)
            return
        if config.frozen:
            self._intake.reject(DEMAND_TARGET, "the agent is frozen", raw)
            return
        for move in self._pacer.take(change, config):
            self._move_target(move)
        self._ex.show()

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Any other signal name: recorded in status.rejected, never silently lost."""
        self._ex.signals += 1
        self._intake.reject_unknown(name, args)

    @workflow.signal(name=APPROVAL_REQUESTED, description="internal: a run waits for an approval")
    def approval_requested(self, raw: Any) -> None:
        """A run of this agent waits for an operator's decision (internal)."""
        pending = self._accept(APPROVAL_REQUESTED, raw, PendingApproval)
        if pending is not None:
            self._approvals.add(pending)
            self._emit("approval_requested", pending.id, **approval_facts(pending))
            self._ex.show()

    @workflow.signal(name=APPROVAL_CLOSED, description="internal: an approval wait ended")
    def approval_closed(self, raw: Any) -> None:
        """A run stopped waiting without a decision from here (its timeout)."""
        closed = self._accept(APPROVAL_CLOSED, raw, ApprovalClosed)
        decided = None if closed is None else self._approvals.close(closed)
        if decided is not None:
            self._decided(decided)
            if decided.decision.by == "timeout":
                pending = decided.pending
                self._emit("approval_expired", pending.id, **approval_facts(pending))
            self._ex.show()

    # ------------------------------------------------------------ updates
    # Bare decorators: with arguments the SDK types an async update as
    # returning a coroutine, which breaks execute_update for callers under
    # mypy. Each validator refuses a bad request before it reaches history.

    @workflow.update
    async def update_config(self, raw: Any) -> AgentConfig:
        """Change part of the config; returns the resulting config. A change
        the model should hear of is a trigger; the monitor gets its part
        (poll interval, target, enabled) at once."""
        patch = parse_config_patch(raw).value
        if patch is None:
            # The validator refused it already; this only guards a replay of
            # an update accepted by older code.
            raise ApplicationError("invalid config", non_retryable=True)
        ex = self._ex
        change = self._keeper.apply(patch)
        if change.target_set:
            # The operator's word: a demand target held back must not undo it.
            self._pacer.drop("an operator set the target or the mode")
        if change.news:
            self._intake.news(change.news)
        self._wake()
        ex.show()
        if change.start_monitor:
            await self._monitor.ensure(self._keeper.config)
        elif change.monitor:
            await self._monitor.configure(self._keeper.config)
        return self._keeper.config

    @update_config.validator
    def _validate_config(self, raw: Any) -> None:
        """Runs before the update is written to history: a bad value is refused
        with a clear message and leaves no trace."""
        refusal = self._keeper.refusal(raw)
        if refusal is not None:
            raise ValueError(refusal)

    @workflow.update
    async def freeze(self, raw: Any) -> FreezeReport:
        """Kill switch: `{"reason", "destroy_all", "author"}`. Stops runs, the
        monitor and every fleet change; with `destroy_all`, destroys every
        machine of this agent at vast.ai and returns once none is listed
        (workflows/agent_freeze.py)."""
        req = parse_payload(FreezeRequest, raw, optional=True).value
        if req is None:
            raise ApplicationError("invalid freeze request", non_retryable=True)
        ex = self._ex
        already = self._keeper.config.frozen
        info = FreezeInfo(
            reason=req.reason, author=req.author, at=workflow.now(), destroy_all=req.destroy_all
        )
        frozen = self._switch.freeze(info, self._keeper.config)
        if frozen is not None:
            self._set_mode(frozen)
            self._emit(
                "frozen", "", author=req.author, reason=req.reason, destroy_all=req.destroy_all
            )
            self._wake()
            # A run waiting for a human must not rent once it is approved later.
            for decided in self._approvals.deny_all(req.author, req.reason):
                self._decided(decided)
                await tell_run(decided)
            ex.show()
            await self._monitor.configure(self._keeper.config)  # disabled: it ends within a poll
        fleet, error = await self._switch.stop_fleet(req.destroy_all)
        return FreezeReport(
            frozen=True,
            already_frozen=already,
            info=self._switch.info or info,
            fleet=fleet,
            error=error,
        )

    @freeze.validator
    def _validate_freeze(self, raw: Any) -> None:
        self._switch.validate_freeze(raw)

    @workflow.update
    async def unfreeze(self, raw: Any) -> AgentConfig:
        """Undo `freeze`: `{"reason", "author"}`. The monitor starts again and
        the next run is told, so it re-plans the fleet."""
        req = parse_payload(UnfreezeRequest, raw, optional=True).value
        if req is None:
            raise ApplicationError("invalid unfreeze request", non_retryable=True)
        ex = self._ex
        unfrozen = self._switch.unfreeze(req, self._keeper.config)
        if unfrozen is None:
            return self._keeper.config
        self._set_mode(unfrozen.config)
        self._emit("unfrozen", "", author=req.author, reason=req.reason)
        self._intake.news(unfrozen.news)
        self._wake()
        ex.show()
        await self._monitor.ensure(self._keeper.config)
        return self._keeper.config

    @unfreeze.validator
    def _validate_unfreeze(self, raw: Any) -> None:
        self._switch.validate_unfreeze(raw)

    @workflow.update
    async def decide_approval(self, raw: Any) -> ApprovalOutcome:
        """An operator approves or denies a pending approval:
        `{"approval_id", "approve", "note", "author"}`. Forwarded to the run
        that waits for it; answers with the approval and the decision."""
        req = parse_payload(ApprovalDecisionRequest, raw).value
        decided = None if req is None else self._approvals.decide(req)
        if decided is None:
            # The validator refused it already; guards a replay of older code.
            raise ApplicationError("unknown approval", non_retryable=True)
        self._decided(decided)
        self._ex.show()
        error = await tell_run(decided)
        return ApprovalOutcome(approval=decided.pending, decision=decided.decision, error=error)

    @decide_approval.validator
    def _validate_decision(self, raw: Any) -> None:
        """Refused before it reaches history: an unknown, decided or expired ID."""
        parsed = parse_payload(ApprovalDecisionRequest, raw)
        if parsed.value is None:
            raise ValueError(f"decide_approval refused: {parsed.error}")
        refusal = self._approvals.refusal(parsed.value.approval_id)
        if refusal is not None:
            raise ValueError(refusal)

    @workflow.update
    async def ask(self, raw: Any) -> AskResult:
        """`human_message` that waits for its answer: `{"text", "author",
        "message_id", "wait_seconds"}` (or a bare string). The message is
        taken as the signal takes it; the update returns once the run that
        took it has ended, with its answer, run number, verdict and cost, or
        at once when the message is refused (frozen, paused, backlog full),
        or `pending` with the run to follow after `wait_seconds` (default
        600) (workflows/agent_ask.py)."""
        ex = self._ex
        # Counted as a human_message is (continue-as-new watches the count).
        ex.signals += 1
        req = parse_payload(AskRequest, raw, bare="text").value
        if req is None:
            # Only a replay of an update accepted by older code gets here.
            raise ApplicationError("invalid message", non_retryable=True)
        reason = no_answer_now(self._keeper.config, self._switch.info)
        if reason:
            self._intake.reject("ask", reason, raw)
            return refused(ex.agent_id, reason)
        taken = self._intake.message(req.message())
        self._offered("ask", taken if isinstance(taken, Refusal) else None, raw)
        if isinstance(taken, Refusal):
            return refused(ex.agent_id, taken.reason)
        return await self._asks.answer(taken, req.wait_seconds, lambda: ex.continuing)

    @ask.validator
    def _validate_ask(self, raw: Any) -> None:
        """Refuse a malformed `ask` before it reaches history."""
        parsed = parse_payload(AskRequest, raw, bare="text")
        if parsed.value is None:
            raise ValueError(f"invalid message: {parsed.error}")

    # ------------------------------------------------------------ queries

    @workflow.query(
        name="live_config",
        description="the config in force now (fleet tools read it right before acting)",
    )
    def live_config(self) -> AgentConfig:
        """The current config, so a fleet tool call applies guardrails accepted
        after its run started (read-only)."""
        return self._keeper.config

    @workflow.query(
        description="phase, run count, session, pending triggers, wakes, last run, config"
    )
    def status(self) -> AgentStatus:
        """What the agent is doing now (contract: see docs/ARCHITECTURE.md)."""
        config = self._keeper.config
        intake = self._intake
        return self._ex.status(
            intake.shown(),
            intake.bytes,
            len(intake.unstored_keys),
            self._pacer.status(config),
            self._budget.status(config),
        )

    @workflow.query(description="internal: operator message texts not yet in the store")
    def unstored_messages(self) -> list[InboxItem]:
        """For the store_operator_messages activity (texts cross history once)."""
        return self._intake.unstored_items()
