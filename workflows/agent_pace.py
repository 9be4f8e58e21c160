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
  the hour allows (`_due`, workflows/agent.py): triggers, wakes and
  messages wait in state, nothing is dropped, and `status.llm_spend` and the
  timer's summary say why. The first hold of a stretch notifies
  (`llm_spend_capped`). The autopilot costs $0: it is never held.

Each owns its slice of `AgentState` (`PaceSlice`, `BudgetSlice`:
continue-as-new carries them), is handed the config in force, reads the
workflow's clock only, and returns what changed (`TargetMove`, `SpendHold`):
FleetAgentWorkflow (workflows/agent.py) applies the target, queues the news
for the next run, notifies. New commands (the held change's timer) only
under their patches, so recorded histories replay.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
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

__all__ = [
    "DEMAND_PACE_PATCH",
    "DUE_FIRST_PATCH",
    "LLM_CAP_PATCH",
    "BudgetSlice",
    "DemandPacer",
    "LlmBudget",
    "PaceSlice",
    "SpendHold",
    "TargetMove",
]

#: Demand target changes are counted and held past max_demand_changes_per_hour.
DEMAND_PACE_PATCH = "demand-change-pace"
#: Runs are held while the last hour's LLM cost is at max_llm_usd_per_hour.
LLM_CAP_PATCH = "llm-spend-cap"
#: A held change whose slot has come applies before a newer change is taken.
DUE_FIRST_PATCH = "demand-held-due-first"
#: The cause of a due time the LLM cap moved (fleet_agent/loop/schedule.py's Due).
LLM_CAP = "llm_cap"


def _clamped(target: float, config: AgentConfig) -> float:
    return min(max(target, config.min_target), config.max_target)


class PaceSlice(Protocol):
    """The demand pace's slice of the durable state (fields of `AgentState`)."""

    demand: DemandTargetChange | None
    demand_changes: list[datetime]
    demand_held: HeldDemandChange | None


@dataclass(frozen=True)
class TargetMove:
    """A demand target applied: the config that follows, and the news for the
    next run (a config-change trigger)."""

    config: AgentConfig
    news: str


class DemandPacer:
    """Applies, holds and releases the monitor's demand target changes (the
    `PaceSlice` only; handed the config in force, it returns the moves)."""

    def __init__(self, slice_: PaceSlice, agent_id: str, *, enabled: bool) -> None:
        self._s = slice_
        self._agent_id = agent_id
        #: From `workflow.patched(DEMAND_PACE_PATCH)`; off, every change
        #: applies at once as before.
        self.enabled = enabled

    def take(self, change: DemandTargetChange, config: AgentConfig) -> list[TargetMove]:
        """A `demand_target` the agent accepted (demand mode, not frozen): the
        moves of the target it makes now, in order (none while it is held)."""
        s = self._s
        if not self.enabled:
            s.demand = change
            return _listed(self._apply(change, None, config))
        moves: list[TargetMove] = []
        release = self.release_at(config)
        if release is not None and release <= workflow.now() and workflow.patched(DUE_FIRST_PATCH):
            # The held change's slot came at this very instant, and `loop`'s
            # timer has not run yet: apply it first, as that timer would
            # have. Otherwise the outcome hung on which of the two the worker
            # handled first, and they tie whenever the monitor polls on the
            # hour of the change it signalled (its polls are a whole interval
            # apart): the old change applied and this one held, or the old
            # one dropped and this one applied.
            moves = _listed(self.release(config))
            config = moves[-1].config if moves else config
        target = _clamped(change.target_per_h, config)
        if target == config.target_proofs_per_hour:
            # The monitor's newest word is the target in force: nothing to hold.
            s.demand = change
            self.drop("the monitor's target is the one in force again")
            return moves
        now = workflow.now()
        cap = config.max_demand_changes_per_hour
        slot = next_slot(s.demand_changes, now, cap)
        if slot is None:
            s.demand_held = None
            s.demand = change
            return moves + _listed(self._apply(change, None, config))
        held = s.demand_held
        s.demand_held = HeldDemandChange(
            change=change, since=held.since if held is not None else now
        )
        workflow.logger.info(
            "agent %s holds the demand target %g until %s (%d changes in the last hour, max %d)",
            self._agent_id,
            target,
            slot.isoformat(),
            len(in_window(s.demand_changes, now)),
            cap,
        )
        return moves

    def drop(self, why: str) -> None:
        """Forget the held change (an operator set the target or the mode, a
        freeze, or the monitor agrees with the target in force)."""
        held = self._s.demand_held
        if held is None:
            return
        self._s.demand_held = None
        workflow.logger.info(
            "agent %s drops the held demand target %g: %s",
            self._agent_id,
            held.change.target_per_h,
            why,
        )

    def release_at(self, config: AgentConfig) -> datetime | None:
        """When the held change may apply (None: nothing held)."""
        s = self._s
        if s.demand_held is None:
            return None
        now = workflow.now()
        return next_slot(s.demand_changes, now, config.max_demand_changes_per_hour) or now

    async def loop(
        self, config: Callable[[], AgentConfig], apply: Callable[[TargetMove], None]
    ) -> None:
        """Beside the agent's loop, for the life of the execution: releases the
        held change once the hour allows (mid-run too, as a signal would), and
        hands the move to `apply`. `config` is read at each step."""
        while True:
            await workflow.wait_condition(lambda: self._s.demand_held is not None)
            at = self.release_at(config())
            now = workflow.now()
            if at is not None and at > now:
                # Woken early when the change is dropped or the cap moves.
                with contextlib.suppress(TimeoutError):
                    await workflow.wait_condition(
                        functools.partial(self._moved, at, config),
                        timeout=at - now,
                        timeout_summary="held demand target",
                    )
                continue
            move = self.release(config())
            if move is not None:
                apply(move)

    def _moved(self, at: datetime, config: Callable[[], AgentConfig]) -> bool:
        return self.release_at(config()) != at

    def release(self, config: AgentConfig) -> TargetMove | None:
        """Apply the held change now, if it still should."""
        s = self._s
        held = s.demand_held
        if held is None:
            return None
        if config.target_mode != "demand" or config.frozen:
            self.drop("the agent is no longer in demand mode" if not config.frozen else "frozen")
            return None
        s.demand_held = None
        if _clamped(held.change.target_per_h, config) == config.target_proofs_per_hour:
            return None
        s.demand = held.change
        return self._apply(held.change, held.since, config)

    def _apply(
        self, change: DemandTargetChange, held_since: datetime | None, config: AgentConfig
    ) -> TargetMove | None:
        """The change's target from now (clamped to [min_target, max_target]),
        with the news for the next run."""
        target = _clamped(change.target_per_h, config)
        old = config.target_proofs_per_hour
        if target == old:
            return None
        now = workflow.now()
        news = f"target_proofs_per_hour: {old:g} → {target:g} (demand: {change.reason})"
        if self.enabled:
            self._s.demand_changes = [*in_window(self._s.demand_changes, now), now]
        if held_since is not None:
            news += (
                f" [held from {held_since:%H:%M}Z: max_demand_changes_per_hour "
                f"{config.max_demand_changes_per_hour}]"
            )
        return TargetMove(config.model_copy(update={"target_proofs_per_hour": target}), news)

    def status(self, config: AgentConfig) -> DemandPace | None:
        """`status.demand_pace`: in demand mode (or while a change is held)."""
        s = self._s
        if not self.enabled or (config.target_mode != "demand" and s.demand_held is None):
            return None
        held = s.demand_held
        return DemandPace(
            max_per_hour=config.max_demand_changes_per_hour,
            changes_last_hour=len(in_window(s.demand_changes, workflow.now())),
            held=held,
            release_at=self.release_at(config) if held is not None else None,
        )


def _listed(move: TargetMove | None) -> list[TargetMove]:
    return [] if move is None else [move]


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
