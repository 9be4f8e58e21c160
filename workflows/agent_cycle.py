"""One run of FleetAgentWorkflow's loop, and what its end means for the agent.

`RunCycle` is the lowest base of FleetAgentWorkflow (workflows/agent.py;
its loop: workflows/agent_loop.py). It holds the execution and the helpers
(each owning its slice of the state, docs/decisions/workflow-helpers.md),
the effects every part of the workflow shares (wake the loop, queue news
for the next run, notify, continue as new), and a run's cycle: the triggers
and due wakes taken from the intake, the run started and awaited by
`RunLauncher`, and its end handed to each part it concerns (the asks
waiting, the notifications, the wakes it asked for, the LLM budget, the
approvals it waited for, the known demand events it recorded).
Deterministic: workflow code.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models, pure helpers and the helpers' classes.
    from fleet_agent.loop.pace import usd
    from fleet_agent.loop.schedule import Due, next_due
    from fleet_agent.loop.triggers import RUN_CARRIES_UNSTORED_BYTES, for_run
    from fleet_agent.loop.wakes import add_wake, due_wakes
    from fleet_agent.loop.wakes import cancel_wake as remove_wake
    from fleet_agent.models import (
        NotifyEventKind,
        Phase,
        RunInFlight,
        RunInput,
        RunResult,
        RunStatus,
        TriggerKind,
    )
    from fleet_agent.notify.run_notices import auth_failure
    from workflows.agent_approvals import ApprovalsBook
    from workflows.agent_ask import AskBook
    from workflows.agent_config import ConfigKeeper, with_run_events
    from workflows.agent_freeze import KillSwitch
    from workflows.agent_inputs import Intake
    from workflows.agent_monitor import MonitorLink
    from workflows.agent_notify import Notifier
    from workflows.agent_pace import DemandPacer, LlmBudget
    from workflows.agent_runs import RUN_CARRIES_TEXTS_PATCH, RunLauncher
    from workflows.agent_state import AgentExecution
    from workflows.metrics import record_run_finished, record_run_started

__all__ = ["RunCycle"]


class RunCycle:
    """The execution, its helpers, the shared effects and a run's cycle."""

    _ex: AgentExecution
    _intake: Intake
    _keeper: ConfigKeeper
    _approvals: ApprovalsBook
    _switch: KillSwitch
    _monitor: MonitorLink
    _notifier: Notifier
    _pacer: DemandPacer
    _budget: LlmBudget
    _runs: RunLauncher
    _asks: AskBook

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
