"""The agent's paces: demand target changes per hour, LLM dollars per hour.

Demand mode wakes a run at every move of the target, and every run may pay
the model; nothing else bounded either (docs/decisions/demand.md, "Paces").

- `DemandPacer` applies the monitor's `demand_target` while fewer than
  `max_demand_changes_per_hour` were applied in the last hour. Past that,
  the change is held: a newer one replaces it (the monitor decides from its
  newest reading), one that brings back the target in force drops it, and
  a task beside the loop applies it when the oldest counted change is an
  hour old, as one more change. An operator's own target or mode, or a
  freeze, drops it.
- `LlmBudget` counts each run's LLM cost (`RunResult.cost_usd`, priced by
  `record_run`) at the run's end. While the runs of the last hour cost
  `max_llm_usd_per_hour` or more, the next run's due time is moved to when
  the hour allows (`AgentExecution.compute_due`): triggers, wakes and
  messages wait in state, nothing is dropped, and `status.llm_spend` and the
  timer's summary say why. The first hold of a stretch notifies
  (`llm_spend_capped`). The autopilot costs $0: it is never held.

Both keep their memory in `AgentState` (continue-as-new carries it) and read
the workflow's clock only. New commands (the held change's timer) only under
their patches, so recorded histories replay.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules.
    from fleet_agent.loop.pace import (
        add_spend,
        hour_spend,
        in_window,
        next_slot,
        spend_release,
    )
    from fleet_agent.loop.schedule import Due
    from fleet_agent.models import (
        AgentConfig,
        DemandPace,
        DemandTargetChange,
        HeldDemandChange,
        LlmSpendPace,
        SpendMark,
    )
    from workflows.agent_state import AgentExecution

__all__ = ["DEMAND_PACE_PATCH", "DUE_FIRST_PATCH", "LLM_CAP_PATCH", "DemandPacer", "LlmBudget"]

#: Demand target changes are counted and held past max_demand_changes_per_hour.
DEMAND_PACE_PATCH = "demand-change-pace"
#: Runs are held while the last hour's LLM cost is at max_llm_usd_per_hour.
LLM_CAP_PATCH = "llm-spend-cap"
#: A held change whose slot has come applies before a newer change is taken.
DUE_FIRST_PATCH = "demand-held-due-first"
#: The cause of a due time the LLM cap moved (fleet_agent/loop/schedule.py's Due).
LLM_CAP = "llm_cap"


def _clamped(target: float, ex: AgentExecution) -> float:
    config = ex.state.config
    return min(max(target, config.min_target), config.max_target)


class DemandPacer:
    """Applies, holds and releases the monitor's demand target changes."""

    def __init__(self, ex: AgentExecution) -> None:
        self._ex = ex
        #: Set by the workflow from `workflow.patched(DEMAND_PACE_PATCH)`;
        #: off, every change applies at once as before.
        self.enabled = False

    def take(self, change: DemandTargetChange) -> None:
        """A `demand_target` the agent accepted (demand mode, not frozen)."""
        ex = self._ex
        if not self.enabled:
            ex.state.demand = change
            self._apply(change, None)
            return
        release = self.release_at()
        if release is not None and release <= workflow.now() and workflow.patched(DUE_FIRST_PATCH):
            # The held change's slot came at this very instant, and `loop`'s
            # timer has not run yet: apply it first, as that timer would
            # have. Otherwise the outcome hung on which of the two the worker
            # handled first, and they tie whenever the monitor polls on the
            # hour of the change it signalled (its polls are a whole interval
            # apart): the old change applied and this one held, or the old
            # one dropped and this one applied.
            self._release()
        target = _clamped(change.target_per_h, ex)
        if target == ex.state.config.target_proofs_per_hour:
            # The monitor's newest word is the target in force: nothing to hold.
            ex.state.demand = change
            self.drop("the monitor's target is the one in force again")
            return
        now = workflow.now()
        cap = ex.state.config.max_demand_changes_per_hour
        slot = next_slot(ex.state.demand_changes, now, cap)
        if slot is None:
            ex.state.demand_held = None
            ex.state.demand = change
            self._apply(change, None)
            return
        held = ex.state.demand_held
        ex.state.demand_held = HeldDemandChange(
            change=change, since=held.since if held is not None else now
        )
        workflow.logger.info(
            "agent %s holds the demand target %g until %s (%d changes in the last hour, max %d)",
            ex.agent_id,
            target,
            slot.isoformat(),
            len(in_window(ex.state.demand_changes, now)),
            cap,
        )

    def drop(self, why: str) -> None:
        """Forget the held change (an operator set the target or the mode, a
        freeze, or the monitor agrees with the target in force)."""
        ex = self._ex
        held = ex.state.demand_held
        if held is None:
            return
        ex.state.demand_held = None
        workflow.logger.info(
            "agent %s drops the held demand target %g: %s",
            ex.agent_id,
            held.change.target_per_h,
            why,
        )

    def release_at(self) -> datetime | None:
        """When the held change may apply (None: nothing held)."""
        ex = self._ex
        if ex.state.demand_held is None:
            return None
        now = workflow.now()
        cap = ex.state.config.max_demand_changes_per_hour
        return next_slot(ex.state.demand_changes, now, cap) or now

    async def loop(self) -> None:
        """Beside the agent's loop, for the life of the execution: applies the
        held change once the hour allows (mid-run too, as a signal would)."""
        while True:
            await workflow.wait_condition(lambda: self._ex.state.demand_held is not None)
            at = self.release_at()
            now = workflow.now()
            if at is not None and at > now:
                # Woken early when the change is dropped or the cap moves.
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(
                        functools.partial(self._moved, at),
                        timeout=at - now,
                        timeout_summary="held demand target",
                    )
                continue
            self._release()

    def _moved(self, at: datetime) -> bool:
        return self.release_at() != at

    def _release(self) -> None:
        ex = self._ex
        held = ex.state.demand_held
        if held is None:
            return
        config = ex.state.config
        if config.target_mode != "demand" or config.frozen:
            self.drop("the agent is no longer in demand mode" if not config.frozen else "frozen")
            return
        ex.state.demand_held = None
        if _clamped(held.change.target_per_h, ex) == config.target_proofs_per_hour:
            return
        ex.state.demand = held.change
        self._apply(held.change, held.since)
        ex.show()

    def _apply(self, change: DemandTargetChange, held_since: datetime | None) -> None:
        """Hold the change's target from now (clamped to [min_target,
        max_target]) and tell the next run why, as a config change."""
        ex = self._ex
        config = ex.state.config
        target = _clamped(change.target_per_h, ex)
        old = config.target_proofs_per_hour
        if target == old:
            return
        now = workflow.now()
        ex.state.config = config.model_copy(update={"target_proofs_per_hour": target})
        reason = f"target_proofs_per_hour: {old:g} → {target:g} (demand: {change.reason})"
        if self.enabled:
            ex.state.demand_changes = [*in_window(ex.state.demand_changes, now), now]
        if held_since is not None:
            reason += (
                f" [held from {held_since:%H:%M}Z: max_demand_changes_per_hour "
                f"{config.max_demand_changes_per_hour}]"
            )
        ex.buffer.add_config_change(ex.state.next_trigger_seq, now, reason)
        ex.state.next_trigger_seq += 1
        ex.notify()

    def status(self) -> DemandPace | None:
        """`status.demand_pace`: in demand mode (or while a change is held)."""
        ex = self._ex
        state = ex.state
        if not self.enabled or (state.config.target_mode != "demand" and state.demand_held is None):
            return None
        held = state.demand_held
        return DemandPace(
            max_per_hour=state.config.max_demand_changes_per_hour,
            changes_last_hour=len(in_window(state.demand_changes, workflow.now())),
            held=held,
            release_at=self.release_at() if held is not None else None,
        )


class BudgetSlice(Protocol):
    """The LLM budget's slice of the durable state (fields of `AgentState`)."""

    llm_spend: list[SpendMark]
    llm_held_since: datetime | None


@dataclass(frozen=True)
class SpendHold:
    """The first hold of a stretch: what the last hour cost, the cap, until when."""

    last_hour_usd: float
    cap_usd: float
    until: datetime


class LlmBudget:
    """Counts the runs' LLM cost over the last hour and holds runs past the
    cap (the `BudgetSlice` only; the config is handed in)."""

    def __init__(self, slice_: BudgetSlice, agent_id: str, *, enabled: bool) -> None:
        self._s = slice_
        self._agent_id = agent_id
        #: From `workflow.patched(LLM_CAP_PATCH)`.
        self.enabled = enabled

    def record(self, cost_usd: float, at: datetime) -> None:
        """A run's cost, at its end (a $0 run, the autopilot's, leaves no mark)."""
        if not self.enabled or cost_usd <= 0:
            return
        self._s.llm_spend = add_spend(self._s.llm_spend, at, cost_usd, workflow.now())

    def hold(self, due: Due | None, config: AgentConfig) -> Due | None:
        """`due`, or later when the last hour's LLM cost is at the cap: then
        when enough of it is an hour old."""
        if not self.enabled or due is None:
            return due
        cap = config.max_llm_usd_per_hour
        release = spend_release(self._s.llm_spend, workflow.now(), cap)
        if release is None or release <= due.at:
            return due
        return Due(release, f"LLM spend cap ${cap:g}/h reached: runs held", LLM_CAP)

    def observe(self, due: Due | None, config: AgentConfig) -> SpendHold | None:
        """The loop found no run due now. The first hold of a stretch is
        returned (to notify `llm_spend_capped`) and logged; a stretch ends when
        nothing holds."""
        if not self.enabled:
            return None
        s = self._s
        if due is None or due.cause != LLM_CAP:
            s.llm_held_since = None
            return None
        if s.llm_held_since is not None:
            return None
        now = workflow.now()
        s.llm_held_since = now
        spent = hour_spend(s.llm_spend, now)
        cap = config.max_llm_usd_per_hour
        workflow.logger.warning(
            "agent %s holds its runs until %s: the LLM cost $%.2f in the last hour (cap $%g/h)",
            self._agent_id,
            due.at.isoformat(),
            spent,
            cap,
        )
        return SpendHold(last_hour_usd=round(spent, 4), cap_usd=cap, until=due.at)

    def started(self) -> None:
        """A run starts: whatever held the loop is over."""
        if self.enabled:
            self._s.llm_held_since = None

    def status(self, config: AgentConfig) -> LlmSpendPace | None:
        """`status.llm_spend`: the last hour's cost, the cap, and any hold."""
        if not self.enabled:
            return None
        s = self._s
        now = workflow.now()
        cap = config.max_llm_usd_per_hour
        until = spend_release(s.llm_spend, now, cap)
        return LlmSpendPace(
            cap_usd=cap,
            last_hour_usd=round(hour_spend(s.llm_spend, now), 6),
            held_since=s.llm_held_since if until is not None else None,
            held_until=until,
        )
