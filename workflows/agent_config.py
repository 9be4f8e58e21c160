"""The agent's config: kept where a restart finds it, recalled on a fresh start.

The watchdog's Schedule (starter/watchdog_schedule.py) starts an agent that was ended
(terminated, failed, timed out). Such a fresh execution has no state handed
over: its run numbering continues from the store (workflows/agent.py), its
config is the last one kept in the store, and how the previous execution
ended becomes an `AgentRestarted` fact in its state. Both are new commands
in existing paths, behind `WATCHDOG_PATCH` (workflows/agent.py).

`ConfigKeeper` owns the config's slice of the agent's state (`ConfigSlice`:
the config in force and the one last written to the store). The workflow
(workflows/agent.py) decides every change of the config and sets it here;
the keeper applies an operator's patch and returns what changed, writes each
new config to the store and, on a fresh start, returns what it recalled.
Touches: the activities recall_agent and save_agent_config (→ the store,
the Temporal client). Deterministic: workflow code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and a pure rule.
    from fleet_agent.demand.events import MAX_EVENTS, merge_event
    from fleet_agent.loop.inputs import apply_patch, parse_config_patch
    from fleet_agent.models import (
        AgentConfig,
        AgentRestarted,
        ConfigPatch,
        RecallRequest,
        RunResult,
        SaveConfigRequest,
    )
    from workflows import stubs
    from workflows.policies import STORE_RETRY, STORE_TIMEOUT

__all__ = [
    "DEMAND_EVENTS_PATCH",
    "EVENT_OWNERS_PATCH",
    "KEEP_BEFORE_CAN_PATCH",
    "ConfigChange",
    "ConfigKeeper",
    "ConfigSlice",
    "Recalled",
    "with_run_events",
]

#: With it the keeper schedules no write once the execution is due to
#: continue as new (the next execution writes the config it is handed): an activity
#: scheduled in the task that continues as new is abandoned, and Temporal's
#: time-skipping test server then never releases its clock (temporalio/
#: sdk-java issue 1138), which stopped a benchmark day in demand mode, whose
#: target changes keep the keeper busy.
KEEP_BEFORE_CAN_PATCH = "keep-config-not-at-continue-as-new"
#: A run's `expect_demand` events go into the config and to the monitor.
DEMAND_EVENTS_PATCH = "run-demand-events"
#: ... as the model's (`DemandEvent.set_by`): within its share, never
#: displacing an operator's (fleet_agent/demand/events.py).
EVENT_OWNERS_PATCH = "demand-event-owners"


# Config fields whose change is news for the model (it should re-plan); the
# others (pause, heartbeat, budgets) only change how the loop runs.
_FLEET_FIELDS = frozenset(
    {
        "target_proofs_per_hour",
        "max_instances",
        "max_fleet_dph",
        "max_instance_dph",
        # New key: no recorded history holds a change of it, so no patch.
        "max_inet_down_cost_per_tb",
        "allowed_gpus",
        "min_reliability",
        "dry_run",
        "not_proving_minutes",
        "offline_grace_minutes",
        "min_release_age_minutes",
        "max_creates_per_hour",
        "max_destroys_per_hour",
        "daily_budget_usd",
        "target_mode",
    }
)
# Config fields the monitor's poll uses (besides monitor_*): sent to it at once.
_MONITOR_FIELDS = frozenset(
    {
        "target_proofs_per_hour",
        "not_proving_minutes",
        "offline_grace_minutes",
        "min_release_age_minutes",
        "failed_host_ttl_hours",
        "target_mode",
        "min_target",
        "max_target",
        "demand_headroom",
        "demand_hysteresis",
        "demand_lower_after_minutes",
        "demand_lead_minutes",
        "demand_events",
    }
)


class ConfigSlice(Protocol):
    """The config's slice of the durable state (fields of `AgentState`)."""

    config: AgentConfig
    stored_config: AgentConfig | None


@dataclass(frozen=True)
class Recalled:
    """What a fresh start found in the store: how the previous execution
    ended (None: this is the agent's first), whether a kept config was
    restored, and why the start's own config was refused over the kept one
    ("" when it was not)."""

    restarted: AgentRestarted | None
    restored: bool
    refused: str = ""


@dataclass(frozen=True)
class ConfigChange:
    """What an `update_config` changed: the keys whose value moved, the news
    for the next run ("" when none of them is the model's business), and
    what the monitor must hear (`start_monitor`: it was off and is on)."""

    changed: list[str]
    news: str
    monitor: bool
    start_monitor: bool

    @property
    def target_set(self) -> bool:
        """The operator set the target or the mode."""
        return "target_proofs_per_hour" in self.changed or "target_mode" in self.changed


class ConfigKeeper:
    """The config in force; written to the store when it changes, recalled on a fresh start."""

    def __init__(self, slice_: ConfigSlice, agent_id: str) -> None:
        self._s = slice_
        self._agent_id = agent_id

    @property
    def config(self) -> AgentConfig:
        """The config in force (the tools read it through the `live_config` query)."""
        return self._s.config

    @config.setter
    def config(self, config: AgentConfig) -> None:
        self._s.config = config

    def apply(self, patch: ConfigPatch) -> ConfigChange:
        """Apply an operator's patch (refused with ApplicationError if it does
        not fit the config as a whole: the validator refused it already)."""
        old = self._s.config
        applied = apply_patch(patch, old)
        if applied.value is None:
            raise ApplicationError(f"invalid config: {applied.error}", non_retryable=True)
        new = self._s.config = applied.value
        changed = sorted(
            k for k in patch.model_dump(exclude_none=True) if getattr(old, k) != getattr(new, k)
        )
        news = ", ".join(
            f"{k}: {getattr(old, k)} → {getattr(new, k)}" for k in changed if k in _FLEET_FIELDS
        )
        monitor = any(k.startswith("monitor_") or k in _MONITOR_FIELDS for k in changed)
        return ConfigChange(
            changed=changed,
            news=news,
            monitor=monitor,
            # (A frozen agent's monitor stays stopped: see MonitorLink.ensure.)
            start_monitor=monitor and new.monitor_enabled and not old.monitor_enabled,
        )

    def refusal(self, raw: Any) -> str | None:
        """Why an `update_config` is refused before it reaches history (a bad
        value, a patch that changes nothing or breaks a rule), or None."""
        parsed = parse_config_patch(raw)
        error = parsed.error
        if parsed.value is not None:
            error = apply_patch(parsed.value, self._s.config).error
        return f"invalid config: {error}" if error else None

    async def recall(self, start_config: ConfigPatch | None, started_by: str) -> Recalled:
        """A fresh execution: take the last known config (an explicit start
        config is applied over it) and return how the previous execution
        ended."""
        recall = await workflow.execute_activity(
            stubs.recall_agent,
            RecallRequest(agent_id=self._agent_id, run_id=workflow.info().run_id),
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary="last known config, and how the previous execution ended",
        )
        refused = ""
        if recall.config is not None:
            applied = apply_patch(start_config, recall.config) if start_config else None
            if applied is not None and applied.value is None:
                # The start's own config does not fit the kept one: the kept
                # one holds, and status.rejected says why.
                refused = applied.error
            self._s.config = (
                applied.value if applied is not None and applied.value else recall.config
            )
        if recall.previous is None:
            return Recalled(None, recall.config is not None, refused)
        return Recalled(
            AgentRestarted(
                at=workflow.now(),
                started_by=started_by or "start",
                previous=recall.previous,
                config_restored=recall.config is not None,
            ),
            recall.config is not None,
            refused,
        )

    async def keep(self, ending: Callable[[], bool]) -> None:
        """For the life of the execution: write each new config to the store
        (the first one too), so a restart finds the latest. A write in flight
        at a continue-as-new is written again by the next execution; none is
        scheduled while `ending` (the execution is due to continue as new)."""
        s = self._s
        spare_the_end = workflow.patched(KEEP_BEFORE_CAN_PATCH)
        while True:
            await workflow.wait_condition(
                lambda: s.config != s.stored_config and not (spare_the_end and ending())
            )
            config = s.config.model_copy(deep=True)
            try:
                await workflow.execute_activity(
                    stubs.save_agent_config,
                    SaveConfigRequest(agent_id=self._agent_id, config=config),
                    start_to_close_timeout=STORE_TIMEOUT,
                    retry_policy=STORE_RETRY,
                    summary="keep the config for a restart",
                )
            except ActivityError as exc:  # only if the store refuses for good
                workflow.logger.warning("config not kept in the store: %s", exc.cause or exc)
                return
            s.stored_config = config


def with_run_events(config: AgentConfig, result: RunResult, agent_id: str) -> AgentConfig | None:
    """The config with the known demand events the run recorded
    (`expect_demand`), as `update_config` would put them (the kept config
    follows), or None when nothing changes. The rule is the run's
    (fleet_agent/demand/events.py), applied again to the config as it is
    now: an operator may have changed it meanwhile."""
    if not result.demand_events or not workflow.patched(DEMAND_EVENTS_PATCH):
        return None
    events = list(config.demand_events)
    now = workflow.now()
    # The model's, whatever the payload says: the agent decides who set
    # what (a run of an older release sent no owner). Before the patch,
    # every event was merged as an operator's is.
    owner = "model" if workflow.patched(EVENT_OWNERS_PATCH) else "operator"
    for sent in result.demand_events:
        event = sent.model_copy(update={"set_by": owner})
        merged = merge_event(events, event, now)
        if merged.refused:
            workflow.logger.warning(
                "agent %s did not add known event %s of run %s: %s",
                agent_id,
                event.describe(),
                result.run,
                merged.refused,
            )
            continue
        events = merged.events
        for dropped in merged.dropped:
            workflow.logger.warning(
                "agent %s dropped known event %s: run %s added %s (at most %s kept)",
                agent_id,
                dropped.describe(),
                result.run,
                event.describe(),
                MAX_EVENTS,
            )
    if events == config.demand_events:
        return None
    return config.model_copy(update={"demand_events": events})
