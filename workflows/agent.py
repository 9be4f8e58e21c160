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

Every handler is declared here, with what it decides, then the loop and
the effects every handler shares, then a run's cycle and what its end means
for each part. The work is done by helpers the workflow holds, one module
per concept, each owning its slice of the state and returning what changed
(docs/decisions/workflow-helpers.md): the execution's state and shared rules
(workflows/agent_state.py), the intake of signals (agent_inputs.py), the
config (agent_config.py), approvals (agent_approvals.py), the kill switch
(agent_freeze.py), runs and the store loop (agent_runs.py), the monitor
(agent_monitor.py), notifications (agent_notify.py) and the paces
(agent_pace.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, NoReturn, TypeVar

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models, pure helpers and the helpers' classes.
    from pydantic import BaseModel

    from fleet_agent.loop.inputs import parse_config_patch, parse_payload
    from fleet_agent.loop.pace import usd
    from fleet_agent.loop.schedule import Due, next_due
    from fleet_agent.loop.triggers import RUN_CARRIES_UNSTORED_BYTES, Refusal, for_run
    from fleet_agent.loop.wakes import add_wake, due_wakes
    from fleet_agent.loop.wakes import cancel_wake as remove_wake
    from fleet_agent.models import (
        APPROVAL_CLOSED,
        APPROVAL_REQUESTED,
        DEMAND_TARGET,
        WATCHDOG,
        AgentConfig,
        AgentRestarted,
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
        NotifyEventKind,
        PendingApproval,
        Phase,
        ResetSession,
        RunInFlight,
        RunInput,
        RunResult,
        RunStatus,
        StateChanged,
        TriggerKind,
        TriggerNow,
        UnfreezeRequest,
    )
    from fleet_agent.notify.run_notices import auth_failure
    from workflows import stubs
    from workflows.agent_approvals import ApprovalsBook, Decided, approval_facts, tell_run
    from workflows.agent_ask import AskBook, no_answer_now, refused
    from workflows.agent_config import ConfigKeeper, with_run_events
    from workflows.agent_freeze import KillSwitch
    from workflows.agent_inputs import Intake
    from workflows.agent_monitor import MonitorLink
    from workflows.agent_notify import NOTIFY_PATCH, Around, Notifier
    from workflows.agent_pace import (
        DEMAND_PACE_PATCH,
        LLM_CAP_PATCH,
        DemandPacer,
        LlmBudget,
        TargetMove,
    )
    from workflows.agent_runs import RUN_CARRIES_TEXTS_PATCH, RunLauncher
    from workflows.agent_state import AgentExecution
    from workflows.metrics import record_run_finished, record_run_started
    from workflows.policies import VISIBILITY_RETRY, VISIBILITY_TIMEOUT
    from workflows.search_attributes import PATCH as SEARCH_ATTRIBUTES_PATCH

__all__ = [
    "FRESH_BEFORE_RUN_PATCH",
    "HANDOVER_STATUS_PATCH",
    "WATCHDOG_PATCH",
    "FleetAgentWorkflow",
]

#: An execution handed a run in flight says so from its first task (before
#: that, status showed it idle until its monitor check and search-attribute
#: check were done: under load, seconds).
HANDOVER_STATUS_PATCH = "handover-status-at-start"
#: The config is kept in the store, and a fresh execution recalls it and how
#: the previous one ended (workflows/agent_config.py).
WATCHDOG_PATCH = "watchdog-recall"
#: A run due when the history is within a tenth of its limit starts in a
#: fresh execution rather than being handed over in flight a moment later.
#: Handing over works on a real server; on Temporal's time-skipping test
#: server a child started just before its parent continues as new leaves
#: the clock stopped (temporalio/sdk-java pull request 1539), which ended
#: demand days of the benchmark.
FRESH_BEFORE_RUN_PATCH = "fresh-execution-before-a-run"
_M = TypeVar("_M", bound=BaseModel)


@workflow.defn
class FleetAgentWorkflow:
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
    # (status.rejected, `_accept`).

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

    # ============================================================ the loop
    # wait → debounce → run → repeat, and what the workflow does with its
    # helpers' answers: set the config, queue news, wake the loop, notify.

    def _compose(self, raw: Any) -> None:
        """The execution and its helpers, in the workflow's first task (the
        patches they ask for are recorded in this order)."""
        self._ex = ex = AgentExecution(workflow.info().workflow_id, raw)
        state = ex.state
        # In the first task, before any handler can emit: histories from
        # before notifications replay without them.
        self._notifier = Notifier(ex.agent_id, state.notify, enabled=workflow.patched(NOTIFY_PATCH))
        # Likewise the paces (workflows/agent_pace.py): an execution that
        # began without them keeps its old ways until it continues as new.
        self._budget = LlmBudget(state, ex.agent_id, enabled=workflow.patched(LLM_CAP_PATCH))
        self._pacer = DemandPacer(state, ex.agent_id, enabled=workflow.patched(DEMAND_PACE_PATCH))
        self._intake = Intake(state)
        if ex.start_problem:
            self._intake.reject("start config", ex.start_problem, None)
        self._keeper = ConfigKeeper(state, ex.agent_id)
        self._monitor = MonitorLink(ex.agent_id)
        self._approvals = ApprovalsBook(state)
        self._switch = KillSwitch(state, ex.agent_id)
        self._asks = AskBook(ex.agent_id)
        self._runs = RunLauncher(state, ex.agent_id)

    async def _loop(self) -> None:
        """The workflow's run: start, then wait → run → … until it continues as new."""
        ex = self._ex
        flight = ex.state.run_in_flight
        if flight is not None and workflow.patched(HANDOVER_STATUS_PATCH):
            ex.current_run, ex.phase = flight.run, Phase.RUNNING
        if workflow.patched(SEARCH_ATTRIBUTES_PATCH):
            await self._check_search_attributes()
        watchdog = workflow.patched(WATCHDOG_PATCH)
        if ex.fresh:
            await self._runs.continue_numbering()
            restarted = await self._recall() if watchdog else None
            if restarted is not None:
                ex.state.restarted = restarted
                self._announce_restart(restarted)
            else:
                self._intake.internal(TriggerKind.AGENT_STARTED, "fresh start")
        if watchdog:
            # For the life of this execution: each new config goes to the store.
            self._keeper_task = asyncio.create_task(self._keeper.keep(ex.should_continue_as_new))
        # Runs in the background for the life of this execution: it moves
        # message texts and lost-run records to the store as they come.
        self._store_task = asyncio.create_task(
            self._runs.store_loop(self._intake, self._lost_run_recorded)
        )
        if self._notifier.enabled:
            # Beside the loop, for the life of this execution: delivers the
            # notifications queued, never holding up a run.
            self._notify_task = asyncio.create_task(self._notifier.loop(self._around, ex.show))
        if self._pacer.enabled:
            # Beside the loop too: a held demand target applies when the hour
            # allows, whatever the loop is doing.
            self._pace_task = asyncio.create_task(
                self._pacer.loop(lambda: self._keeper.config, self._released)
            )
        await self._monitor.ensure(self._keeper.config)
        if flight is not None:
            await self._finish_handed_over_run(flight)
        while True:
            await self._wait_until_due()
            if ex.state.reset_reason is not None:
                await self._continue_as_new(reset=True)
            if (
                ex.should_continue_as_new()
                or (ex.nearly_full() and workflow.patched(FRESH_BEFORE_RUN_PATCH))
            ) and not self._run_for_asks_first():
                await self._continue_as_new(reset=False)
            await self._run_once()

    def _run_for_asks_first(self) -> bool:
        """An `ask` waits for a message no run has taken, a run is due for it
        (no pause, freeze or spend cap holds runs) and history allows one more
        run: that run comes before the continue-as-new, so the ask gets its
        answer rather than `pending`. Without asks (every history recorded
        before them) this is False and the loop is as it was."""
        ex = self._ex
        if not self._asks.untaken() or ex.must_continue_as_new():
            return False
        due = self._due()
        return due is not None and due.cause in ("debounce", "wake", "heartbeat")

    async def _recall(self) -> AgentRestarted | None:
        """A fresh start takes the last known config from the store (a frozen
        one stays frozen); how the previous execution ended, if any."""
        ex = self._ex
        recalled = await self._keeper.recall(ex.start_config, ex.started_by)
        if recalled.refused:
            self._intake.reject("start config", recalled.refused, None)
        if recalled.restored:
            self._switch.kept_frozen(self._keeper.config)
        return recalled.restarted

    def _announce_restart(self, fact: AgentRestarted) -> None:
        """THE place where a restart is announced (the watchdog brought the
        agent back, or a start after it had ended). The first run is told as
        its `agent_started` trigger, the worker's log says it,
        `status.restarted` / the Web UI keep it, and a human is notified
        (`agent_restarted`, when the config admits it)."""
        ex = self._ex
        text = fact.text()
        workflow.logger.warning("agent %s %s", ex.agent_id, text)
        self._intake.internal(TriggerKind.AGENT_STARTED, text)
        self._emit(
            "agent_restarted",
            "watchdog",
            how_ended=fact.how_ended()[:300],
            by="the watchdog" if fact.started_by == WATCHDOG else "a start request",
            next_run=self._runs.run_count + 1,
        )

    async def _check_search_attributes(self) -> None:
        """Upsert search attributes in this execution only if the namespace has
        them all: an unregistered one would fail every workflow task."""
        try:
            self._ex.search_attributes = await workflow.execute_activity(
                stubs.search_attributes_ready,
                start_to_close_timeout=VISIBILITY_TIMEOUT,
                retry_policy=VISIBILITY_RETRY,
                summary="are our search attributes registered?",
            )
        except ActivityError as exc:
            workflow.logger.warning("search attributes not checked: %s", exc.cause or exc)
        self._ex.show()

    async def _wait_until_due(self) -> None:
        """Sleep until a run is due, a reset is asked for, or history is long.

        The timer is only replaced when the due time actually moves, so a burst
        of a thousand signals inside one debounce window adds no timers.
        """
        ex = self._ex
        while True:
            if ex.state.reset_reason is not None or (
                ex.should_continue_as_new() and not self._run_for_asks_first()
            ):
                return
            due = self._due()
            now = workflow.now()
            if due is not None and due.at <= now:
                return
            ex.due = due
            ex.changed = False
            self._observe_budget(due)
            config = self._keeper.config
            ex.phase = (
                ex.idle_phase()
                if config.paused or config.frozen
                else Phase.DEBOUNCING
                if due is not None and due.cause == "debounce"
                else Phase.IDLE
            )
            ex.show()
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: ex.changed or ex.must_continue_as_new(),
                    timeout=None if due is None else due.at - now,
                    timeout_summary=None if due is None else due.label,
                )

    def _accept(
        self,
        signal: str,
        raw: Any,
        model: type[_M],
        *,
        bare: str | None = None,
        optional: bool = False,
    ) -> _M | None:
        """The preamble of every signal: counted (continue-as-new watches the
        count), parsed, or refused visibly in status.rejected (None)."""
        self._ex.signals += 1
        parsed = parse_payload(model, raw, bare=bare, optional=optional)
        if parsed.value is None:
            self._intake.reject(signal, parsed.error, raw)
        return parsed.value

    def _offered(
        self, signal: str, refusal: Refusal | None, raw: Any, *, wake: bool = True
    ) -> None:
        """A trigger was offered to the intake: its refusal shown, or the loop
        woken if the due time moved (`wake=False`: it cannot have)."""
        if refusal is not None:
            self._intake.reject(signal, refusal.reason, raw)
        elif wake:
            self._wake()

    def _move_target(self, move: TargetMove) -> None:
        """A demand target applies: the config, and the news for the next run."""
        self._keeper.config = move.config
        self._intake.news(move.news)
        self._wake()

    def _released(self, move: TargetMove) -> None:
        """The pace loop released a held demand target."""
        self._move_target(move)
        self._ex.show()

    def _set_mode(self, config: AgentConfig) -> None:
        """A freeze or an unfreeze: the new config, and the phase between runs
        at once (the loop agrees once it wakes)."""
        ex = self._ex
        self._keeper.config = config
        if ex.current_run is None:
            ex.phase = ex.idle_phase()

    def _decided(self, decided: Decided) -> None:
        """An approval was decided: the daily digest counts it."""
        self._notifier.count_approval()

    # ------------------------------------------------------------ LLM budget

    def _observe_budget(self, due: Due | None) -> None:
        """No run is due now: the first hold of a stretch by the LLM cap notifies."""
        state = self._ex.state
        hold = self._budget.observe(due, self._keeper.config)
        if hold is not None:
            self._emit(
                "llm_spend_capped",
                "llm",
                last_hour_usd=hold.last_hour_usd,
                cap_usd=hold.cap_usd,
                until=hold.until,
                pending=len(state.pending_triggers),
            )

    # ------------------------------------------------------------ notifications

    def _around(self) -> Around:
        """What the notification timers read: approvals to warn of, the digest's spend."""
        return Around(self._keeper.config, self._approvals.pending, self._ex.state.spend)

    # ============================================================ a run's cycle
    # The triggers and due wakes taken, the run started and awaited by
    # `RunLauncher`, and its end handed to each part it concerns.

    # ------------------------------------------------------------ shared effects

    def _due(self) -> Due | None:
        """When the next run is due: its schedule, moved later while the LLM
        spend cap holds runs."""
        ex, config = self._ex, self._keeper.config
        return self._budget.hold(
            next_due(
                firsts=self._intake.firsts,
                wakes=ex.state.wakes,
                config=config,
                heartbeat_from=ex.heartbeat_from,
            ),
            config,
        )

    def _wake(self) -> None:
        """Wake the loop only if the due time moved (or a reset is pending)."""
        ex = self._ex
        if ex.current_run is not None:
            return  # the loop is awaiting a run; it recomputes afterwards
        if ex.state.reset_reason is not None or self._due() != ex.due:
            ex.changed = True

    def _emit(self, kind: NotifyEventKind, subject: str = "", /, **facts: Any) -> bool:
        """Queue a notification if the config in force admits it (agent_notify.py)."""
        return self._notifier.emit(self._keeper.config, kind, subject, **facts)

    async def _continue_as_new(self, *, reset: bool) -> NoReturn:
        """Hand the state to a fresh execution once the message texts are stored."""
        intake = self._intake
        await self._ex.continue_as_new(
            lambda: intake.unstored_keys, intake.taken_unstored, reset=reset
        )

    # ------------------------------------------------------------ a run

    async def _run_once(self) -> None:
        """Start the next run with the pending triggers (or a heartbeat) and wait for it."""
        ex, intake = self._ex, self._intake
        # The run reads message texts from the store, by their keys: its input
        # carries previews. Texts not there yet its load_context fetches by
        # the store loop's own path (the agent's query), so a run does not
        # wait for that loop, whose activity can outlast the P0 window under
        # load (docs/decisions/load-time.md, "A run does not wait for the
        # store"); beyond RUN_CARRIES_UNSTORED_BYTES of them it waits.
        # Histories from before the patch replay the wait.
        if not (
            intake.unstored_bytes <= RUN_CARRIES_UNSTORED_BYTES
            and workflow.patched(RUN_CARRIES_TEXTS_PATCH)
        ):
            await self._until_stored()
        now = workflow.now()
        fired, ex.state.wakes = due_wakes(ex.state.wakes, now)
        for wake in fired:
            intake.internal(TriggerKind.WAKE, wake.reason, wake_id=wake.id)
        triggers = intake.take() or [intake.make(TriggerKind.HEARTBEAT)]
        number = self._runs.next_number()
        ex.current_run, ex.phase, ex.due = number, Phase.RUNNING, None
        self._budget.started()
        record_run_started(ex.agent_id, triggers, now)
        ex.show()
        config = self._keeper.config
        run = await self._runs.start(
            RunInput(
                agent_id=ex.agent_id,
                run=number,
                session=ex.state.session,
                triggers=for_run(triggers),
                config=config,
                wakes=ex.state.wakes,
                next_heartbeat_at=now + timedelta(seconds=config.heartbeat_seconds),
                search_attributes=ex.search_attributes,
            ),
            ex.search_attributes,
        )
        if isinstance(run, RunResult):
            self._asks.started(number, triggers, None)
            self._ended(run)
            return
        self._asks.started(number, triggers, run)
        await workflow.wait_condition(lambda: run.done() or ex.must_continue_as_new())
        if not run.done():
            await self._continue_as_new(reset=False)
        result = await self._runs.outcome(run, number, now)
        self._ended(result)
        await self._take_events(result)

    async def _finish_handed_over_run(self, flight: RunInFlight) -> None:
        """Wait for the run an earlier execution started and handed over."""
        ex = self._ex
        ex.current_run, ex.phase = flight.run, Phase.RUNNING
        ex.show()
        waiting = self._runs.wait_for(flight, self._keeper.config)
        await workflow.wait_condition(lambda: waiting.done() or ex.must_continue_as_new())
        if not waiting.done():
            await self._continue_as_new(reset=False)
        result = await self._runs.handed_over_outcome(flight, waiting)
        self._ended(result)
        await self._take_events(result)

    def _ended(self, result: RunResult) -> None:
        """A run ended: each part it concerns hears of it."""
        ex = self._ex
        record_run_finished(ex.agent_id, result)
        self._asks.finished(result)
        self._notify_run(result)
        for request in result.wake_requests:
            if request.op == "add" and request.wake is not None:
                ex.state.wakes = add_wake(ex.state.wakes, request.wake)
            elif request.op == "cancel":
                ex.state.wakes, _ = remove_wake(ex.state.wakes, request.wake_id)
        ended = self._runs.ended(result)
        # What this run paid the model counts toward max_llm_usd_per_hour.
        self._budget.record(usd(result.cost_usd), ended)
        self._approvals.drop_of(result.run)
        # The heartbeat counts from the end of the last run, whatever its kind.
        ex.heartbeat_from = ended
        ex.current_run = None
        ex.phase = Phase.IDLE
        ex.runs_this_execution += 1

    def _notify_run(self, result: RunResult) -> None:
        """What a run's end tells a human: its notices, a rejected key, a
        streak of failures (workflows/agent_notify.py)."""
        for notice in result.notices:
            self._emit(
                notice.kind,
                notice.subject,
                run=result.run,
                reason=notice.text[:300],
                error=notice.text[:300],
            )
        provider = auth_failure(result.error) if result.error else None
        if provider is not None:
            self._emit("auth_failing", provider, run=result.run, error=result.error[:400])
        self._notifier.run_ended(
            self._keeper.config, result.run, result.status == RunStatus.FAILED, result.error
        )

    async def _take_events(self, result: RunResult) -> None:
        """The known demand events the run recorded: into the config
        (workflows/agent_config.py, `with_run_events`) and to the monitor,
        which forecasts with them."""
        config = with_run_events(self._keeper.config, result, self._ex.agent_id)
        if config is None:
            return
        # No trigger and no new due time: the run that added them knows.
        self._keeper.config = config
        if config.monitor_enabled and not config.frozen:
            await self._monitor.configure(config)

    async def _until_stored(self) -> None:
        ex, intake = self._ex, self._intake
        while intake.unstored_keys:
            await workflow.wait_condition(
                lambda: not intake.unstored_keys or ex.must_continue_as_new()
            )
            if ex.must_continue_as_new():
                await self._continue_as_new(reset=False)

    def _lost_run_recorded(self, cost_usd: float) -> None:
        """The store loop closed a lost run: its rounds were paid."""
        self._budget.record(cost_usd, workflow.now())
        self._wake()
