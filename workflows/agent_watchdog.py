"""The agent's side of the watchdog: keep its config where a restart finds it,
and on a fresh start recall what came before.

The watchdog's Schedule (starter/watchdog_schedule.py) starts an agent that was ended
(terminated, failed, timed out). Such a fresh execution has no state handed
over: its run numbering continues from the store (workflows/agent.py), its
config is the last one kept in the store, and how the previous execution
ended becomes an `AgentRestarted` fact in its state. Both are new commands
in existing paths, behind `WATCHDOG_PATCH` (workflows/agent.py).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models, a pure rule and the execution's state.
    from fleet_agent.loop.inputs import apply_patch
    from fleet_agent.models import (
        AgentRestarted,
        FreezeInfo,
        RecallRequest,
        SaveConfigRequest,
    )
    from workflows import stubs
    from workflows.agent_state import AgentExecution
    from workflows.policies import STORE_RETRY, STORE_TIMEOUT

__all__ = ["KEEP_BEFORE_CAN_PATCH", "ConfigKeeper"]

#: With it the keeper schedules no write once the execution is due to
#: continue as new (the next execution writes the config it is handed): an activity
#: scheduled in the task that continues as new is abandoned, and Temporal's
#: time-skipping test server then never releases its clock (temporalio/
#: sdk-java issue 1138), which stopped a benchmark day in demand mode, whose
#: target changes keep the keeper busy.
KEEP_BEFORE_CAN_PATCH = "keep-config-not-at-continue-as-new"


class ConfigKeeper:
    """Writes the config to the store when it changes; recalls it on a fresh start."""

    def __init__(self, ex: AgentExecution) -> None:
        self._ex = ex

    async def recall(self) -> AgentRestarted | None:
        """A fresh execution: take the last known config (an explicit start
        config is applied over it) and return how the previous execution
        ended, or None when this is the agent's first."""
        ex = self._ex
        recall = await workflow.execute_activity(
            stubs.recall_agent,
            RecallRequest(agent_id=ex.agent_id, run_id=workflow.info().run_id),
            start_to_close_timeout=STORE_TIMEOUT,
            retry_policy=STORE_RETRY,
            summary="last known config, and how the previous execution ended",
        )
        restored = recall.config is not None
        if recall.config is not None:
            explicit = ex.start_config
            applied = apply_patch(explicit, recall.config) if explicit else None
            if applied is not None and applied.value is None:
                # The start's own config does not fit the kept one: the kept
                # one holds, and status.rejected says why.
                ex.reject("start config", applied.error, None)
            ex.state.config = (
                applied.value if applied is not None and applied.value else recall.config
            )
            if ex.state.config.frozen and ex.state.freeze is None:
                # The kill switch holds across a restart, and shows as such.
                ex.state.freeze = FreezeInfo(
                    reason="frozen before the agent ended (its kept config says so)",
                    author="the store",
                    at=workflow.now(),
                )
        if recall.previous is None:
            return None
        return AgentRestarted(
            at=workflow.now(),
            started_by=ex.started_by or "start",
            previous=recall.previous,
            config_restored=restored,
        )

    async def keep(self) -> None:
        """For the life of the execution: write each new config to the store
        (the first one too), so a restart finds the latest. A write in flight
        at a continue-as-new is written again by the next execution."""
        ex = self._ex
        spare_the_end = workflow.patched(KEEP_BEFORE_CAN_PATCH)
        while True:
            await workflow.wait_condition(
                lambda: (
                    ex.state.config != ex.state.stored_config
                    and not (spare_the_end and ex.should_continue_as_new())
                )
            )
            config = ex.state.config.model_copy(deep=True)
            try:
                await workflow.execute_activity(
                    stubs.save_agent_config,
                    SaveConfigRequest(agent_id=ex.agent_id, config=config),
                    start_to_close_timeout=STORE_TIMEOUT,
                    retry_policy=STORE_RETRY,
                    summary="keep the config for a restart",
                )
            except ActivityError as exc:  # only if the store refuses for good
                workflow.logger.warning("config not kept in the store: %s", exc.cause or exc)
                return
            ex.state.stored_config = config
