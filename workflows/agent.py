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

Every handler and the loop are declared here; what they do lives in plain
helpers the workflow holds, one module per concept: the execution's state and
shared rules (workflows/agent_state.py), the intake of signals and the config
update (agent_inputs.py), approvals (agent_approvals.py), the kill switch
(agent_freeze.py), runs and the store loop (agent_runs.py), and the monitor
(agent_monitor.py).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models, pure helpers and the helpers' classes.
    from pydantic import BaseModel

    from fleet_agent.loop.inputs import parse_config_patch, parse_payload
    from fleet_agent.loop.schedule import Due
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
        AskResult,
        DemandTargetChange,
        FreezeInfo,
        FreezeReport,
        FreezeRequest,
        InboxItem,
        NotifyEventKind,
        PendingApproval,
        Phase,
        TriggerKind,
        UnfreezeRequest,
    )
    from workflows import stubs
    from workflows.agent_approvals import ApprovalsBook, Decided, approval_facts, tell_run
    from workflows.agent_ask import AskBook, refused
    from workflows.agent_config import ConfigKeeper
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
    from workflows.agent_runs import RunLauncher
    from workflows.agent_state import AgentExecution
    from workflows.policies import (
        STORE_RETRY,
        STORE_TIMEOUT,
        VISIBILITY_RETRY,
        VISIBILITY_TIMEOUT,
    )
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
        self._ex = ex = AgentExecution(workflow.info().workflow_id, raw)
        # In the first task, before any handler can emit: histories from
        # before notifications replay without them.
        self._notifier = Notifier(
            ex.agent_id, ex.state.notify, enabled=workflow.patched(NOTIFY_PATCH)
        )
        # Likewise the paces (workflows/agent_pace.py): an execution that
        # began without them keeps its old ways until it continues as new.
        self._budget = LlmBudget(ex.state, ex.agent_id, enabled=workflow.patched(LLM_CAP_PATCH))
        ex.hold = self._hold
        self._pacer = DemandPacer(
            ex.state, ex.agent_id, enabled=workflow.patched(DEMAND_PACE_PATCH)
        )
        self._monitor = MonitorLink(ex.agent_id)
        self._approvals = ApprovalsBook(ex.state)
        self._intake = Intake(ex, self._monitor, self._pacer, self._budget)
        self._switch = KillSwitch(ex.state, ex.agent_id)
        self._asks = AskBook(ex.agent_id)
        self._runs = RunLauncher(
            ex, self._approvals, self._monitor, self._notifier, self._budget, self._asks
        )
        self._keeper = ConfigKeeper(ex.state, ex.agent_id)

    # ------------------------------------------------------------ main loop

    @workflow.run
    async def run(self, raw: Any = None) -> None:
        ex = self._ex
        flight = ex.state.run_in_flight
        if flight is not None and workflow.patched(HANDOVER_STATUS_PATCH):
            ex.current_run, ex.phase = flight.run, Phase.RUNNING
        if workflow.patched(SEARCH_ATTRIBUTES_PATCH):
            await self._check_search_attributes()
        watchdog = workflow.patched(WATCHDOG_PATCH)
        if ex.fresh:
            await self._continue_numbering()
            restarted = await self._recall() if watchdog else None
            if restarted is not None:
                ex.state.restarted = restarted
                self._announce_restart(restarted)
            else:
                ex.buffer.add_internal(ex.make_trigger(TriggerKind.AGENT_STARTED, "fresh start"))
        if watchdog:
            # For the life of this execution: each new config goes to the store.
            self._keeper_task = asyncio.create_task(self._keeper.keep(ex.should_continue_as_new))
        # Runs in the background for the life of this execution: it moves
        # message texts and lost-run records to the store as they come.
        self._store_task = asyncio.create_task(self._runs.store_loop())
        if self._notifier.enabled:
            # Beside the loop, for the life of this execution: delivers the
            # notifications queued, never holding up a run.
            self._notify_task = asyncio.create_task(self._notifier.loop(self._around, ex.show))
        if self._pacer.enabled:
            # Beside the loop too: a held demand target applies when the hour
            # allows, whatever the loop is doing.
            self._pace_task = asyncio.create_task(
                self._pacer.loop(lambda: ex.state.config, self._released)
            )
        await self._monitor.ensure(ex.state.config)
        if flight is not None:
            await self._runs.finish_handed_over_run(flight)
        while True:
            await self._wait_until_due()
            if ex.state.reset_reason is not None:
                await ex.continue_as_new(reset=True)
            if (
                ex.should_continue_as_new()
                or (ex.nearly_full() and workflow.patched(FRESH_BEFORE_RUN_PATCH))
            ) and not self._run_for_asks_first():
                await ex.continue_as_new(reset=False)
            await self._runs.run_once()

    def _run_for_asks_first(self) -> bool:
        """An `ask` waits for a message no run has taken, a run is due for it
        (no pause, freeze or spend cap holds runs) and history allows one more
        run: that run comes before the continue-as-new, so the ask gets its
        answer rather than `pending`. Without asks (every history recorded
        before them) this is False and the loop is as it was."""
        ex = self._ex
        if not self._asks.untaken() or ex.must_continue_as_new():
            return False
        due = ex.compute_due()
        return due is not None and due.cause in ("debounce", "wake", "heartbeat")

    async def _continue_numbering(self) -> None:
        """A fresh start (after a terminate, say) never reuses run numbers."""
        ex = self._ex
        counters = await workflow.execute_activity(
            stubs.load_agent_counters,
            ex.agent_id,
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary="continue run numbering from the store",
        )
        ex.state.run_count = max(ex.state.run_count, counters.max_run)
        ex.state.session = max(ex.state.session, counters.max_session)

    async def _recall(self) -> AgentRestarted | None:
        """A fresh start takes the last known config from the store (a frozen
        one stays frozen); how the previous execution ended, if any."""
        ex = self._ex
        recalled = await self._keeper.recall(ex.start_config, ex.started_by)
        if recalled.refused:
            ex.reject("start config", recalled.refused, None)
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
        ex.buffer.add_internal(ex.make_trigger(TriggerKind.AGENT_STARTED, text))
        self._emit(
            "agent_restarted",
            "watchdog",
            how_ended=fact.how_ended()[:300],
            by="the watchdog" if fact.started_by == WATCHDOG else "a start request",
            next_run=ex.state.run_count + 1,
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
            due = ex.compute_due()
            now = workflow.now()
            if due is not None and due.at <= now:
                return
            ex.due = due
            ex.changed = False
            self._observe_budget(due)
            ex.phase = (
                ex.idle_phase()
                if ex.state.config.paused or ex.state.config.frozen
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

    # ------------------------------------------------------------ signals
    # Each is parsed from loose JSON into a model or a visible refusal
    # (status.rejected): workflows/agent_inputs.py.

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
        ex = self._ex
        ex.signals += 1
        return ex.valid(parse_payload(model, raw, bare=bare, optional=optional), signal, raw)

    @workflow.signal(
        description='P0: a message from the operator, {"text": str, "author": str, '
        '"message_id": str (optional, the sender\'s)} or a bare string'
    )
    def human_message(self, raw: Any) -> None:
        """P0: the operator talks to the agent. `{"text", "author"}` or a bare string."""
        self._intake.human_message(raw)

    @workflow.signal(
        description='P1: {"instance_id", "old_state", "new_state", "detail"}; sent by the monitor'
    )
    def state_changed(self, raw: Any) -> None:
        """P1: an instance changed state (sent by the fleet monitor); coalesced per instance."""
        self._intake.state_changed(raw)

    @workflow.signal(
        description='P0: run as soon as the 2 s window allows; {"reason": str} optional'
    )
    def trigger_now(self, raw: Any = None) -> None:
        """P0: run as soon as the P0 window allows. Argument optional."""
        self._intake.trigger_now(raw)

    @workflow.signal(
        description="new conversation after the current run; counters, wakes, triggers kept"
    )
    def reset_session(self, raw: Any = None) -> None:
        """Start a new conversation after the current run; counters, wakes and
        pending triggers carry over."""
        self._intake.reset_session(raw)

    @workflow.signal(description='drop a pending wake: {"wake_id": str}')
    def cancel_wake(self, raw: Any) -> None:
        """Drop one pending wake by id."""
        self._intake.cancel_wake(raw)

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
        ex = self._ex
        config = ex.state.config
        if config.target_mode != "demand":
            ex.reject(DEMAND_TARGET, "not in demand mode (target_mode is fixed)", raw)
            return
        if config.frozen:
            ex.reject(DEMAND_TARGET, "the agent is frozen", raw)
            return
        for move in self._pacer.take(change, config):
            self._move_target(move)
        ex.show()

    def _move_target(self, move: TargetMove) -> None:
        """A demand target applies: the config, and the news for the next run."""
        ex = self._ex
        ex.state.config = move.config
        self._news(move.news)
        ex.notify()

    def _news(self, text: str) -> None:
        """A config change the next run hears of (a `config_changed` trigger)."""
        ex = self._ex
        ex.buffer.add_config_change(ex.state.next_trigger_seq, workflow.now(), text)
        ex.state.next_trigger_seq += 1

    def _released(self, move: TargetMove) -> None:
        """The pace loop released a held demand target."""
        self._move_target(move)
        self._ex.show()

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """Any other signal name: recorded in status.rejected, never silently lost."""
        self._intake.unknown_signal(name, args)

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
            self._news(change.news)
        ex.notify()
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
        already = ex.state.config.frozen
        info = FreezeInfo(
            reason=req.reason, author=req.author, at=workflow.now(), destroy_all=req.destroy_all
        )
        frozen = self._switch.freeze(info, ex.state.config)
        if frozen is not None:
            self._set_mode(frozen)
            self._emit(
                "frozen", "", author=req.author, reason=req.reason, destroy_all=req.destroy_all
            )
            ex.notify()
            # A run waiting for a human must not rent once it is approved later.
            for decided in self._approvals.deny_all(req.author, req.reason):
                self._decided(decided)
                await tell_run(decided)
            ex.show()
            await self._monitor.configure(ex.state.config)  # disabled: it ends within a poll
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
        unfrozen = self._switch.unfreeze(req, ex.state.config)
        if unfrozen is None:
            return ex.state.config
        self._set_mode(unfrozen.config)
        self._emit("unfrozen", "", author=req.author, reason=req.reason)
        self._news(unfrozen.news)
        ex.notify()
        ex.show()
        await self._monitor.ensure(ex.state.config)
        return ex.state.config

    def _set_mode(self, config: AgentConfig) -> None:
        """A freeze or an unfreeze: the new config, and the phase between runs
        at once (the loop agrees once it wakes)."""
        ex = self._ex
        ex.state.config = config
        if ex.current_run is None:
            ex.phase = ex.idle_phase()

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

    def _decided(self, decided: Decided) -> None:
        """An approval was decided: the daily digest counts it."""
        self._notifier.count_approval()

    # ------------------------------------------------------------ LLM budget

    def _hold(self, due: Due | None) -> Due | None:
        """The due time, moved later while the LLM spend cap holds runs."""
        return self._budget.hold(due, self._ex.state.config)

    def _observe_budget(self, due: Due | None) -> None:
        """No run is due now: the first hold of a stretch by the LLM cap notifies."""
        state = self._ex.state
        hold = self._budget.observe(due, state.config)
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

    def _emit(self, kind: NotifyEventKind, subject: str = "", /, **facts: Any) -> bool:
        """Queue a notification if the config in force admits it (agent_notify.py)."""
        return self._notifier.emit(self._ex.state.config, kind, subject, **facts)

    def _around(self) -> Around:
        """What the notification timers read: approvals to warn of, the digest's spend."""
        state = self._ex.state
        return Around(state.config, self._approvals.pending, state.spend)

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
        req = self._intake.ask(raw)
        if isinstance(req, str):
            return refused(ex.agent_id, req)
        taken = self._intake.take_message(req.message(), "ask", raw)
        if isinstance(taken, str):
            return refused(ex.agent_id, taken)
        return await self._asks.answer(taken, req.wait_seconds, lambda: ex.continuing)

    @ask.validator
    def _validate_ask(self, raw: Any) -> None:
        self._intake.validate_ask(raw)

    # ------------------------------------------------------------ queries

    @workflow.query(
        name="live_config",
        description="the config in force now (fleet tools read it right before acting)",
    )
    def live_config(self) -> AgentConfig:
        """The current config, so a fleet tool call applies guardrails accepted
        after its run started (read-only)."""
        return self._ex.state.config

    @workflow.query(
        description="phase, run count, session, pending triggers, wakes, last run, config"
    )
    def status(self) -> AgentStatus:
        """What the agent is doing now (contract: see docs/ARCHITECTURE.md)."""
        return self._intake.status()

    @workflow.query(description="internal: operator message texts not yet in the store")
    def unstored_messages(self) -> list[InboxItem]:
        """For the store_operator_messages activity (texts cross history once)."""
        return self._ex.buffer.unstored_items()
