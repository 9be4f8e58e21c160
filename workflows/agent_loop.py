"""The loop of FleetAgentWorkflow, and what it does with its helpers' answers.

`AgentLoop` is the base of FleetAgentWorkflow (workflows/agent.py, where the
handlers are declared): it composes the execution (workflows/agent_state.py)
and the helpers, one per concept, each owning its slice of the state
(docs/decisions/workflow-helpers.md), and runs wait → debounce → run →
repeat (a run's cycle: its base, `RunCycle`, workflows/agent_cycle.py). It
is where one part's change reaches another: a helper returns what changed,
and the workflow applies it — sets the config, queues the news for the next
run, wakes the loop, shows the details, notifies. Deterministic: workflow
code.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models, pure helpers and the helpers' classes.
    from pydantic import BaseModel

    from fleet_agent.loop.inputs import parse_payload
    from fleet_agent.loop.schedule import Due
    from fleet_agent.loop.triggers import Refusal
    from fleet_agent.models import (
        WATCHDOG,
        AgentConfig,
        AgentRestarted,
        Phase,
        TriggerKind,
    )
    from workflows import stubs
    from workflows.agent_approvals import ApprovalsBook, Decided
    from workflows.agent_ask import AskBook
    from workflows.agent_config import ConfigKeeper
    from workflows.agent_cycle import RunCycle
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
        VISIBILITY_RETRY,
        VISIBILITY_TIMEOUT,
    )
    from workflows.search_attributes import PATCH as SEARCH_ATTRIBUTES_PATCH

__all__ = [
    "FRESH_BEFORE_RUN_PATCH",
    "HANDOVER_STATUS_PATCH",
    "WATCHDOG_PATCH",
    "AgentLoop",
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


class AgentLoop(RunCycle):
    """The loop of FleetAgentWorkflow and the effects of its helpers' answers."""

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
