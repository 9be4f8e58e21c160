"""The kill switch of FleetAgentWorkflow: the `freeze` and `unfreeze` updates.

Decisions (docs/DECISIONS.md, "The kill switch"): a freeze takes effect
before its update returns — no run starts, the monitor stops, and every
mutating tool call is refused from then on, the current run's included (the
tools read the live config). With `destroy_all` the update waits until vast.ai
no longer lists any machine of the agent (activity stop_fleet, retried
without limit), so the answer the operator gets is the truth. `unfreeze`
restarts the monitor and queues a config-change trigger, so the next run
re-plans the fleet.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules only.
    from fleet_agent.inputs import parse_payload
    from fleet_agent.models import (
        AgentConfig,
        FreezeInfo,
        FreezeReport,
        FreezeRequest,
        StopFleetReport,
        StopFleetRequest,
        UnfreezeRequest,
    )
    from workflows import stubs
    from workflows.agent_core import AgentCore
    from workflows.policies import (
        FLEET_HEARTBEAT_TIMEOUT,
        FLEET_READ_TIMEOUT,
        FLEET_RETRY,
        UNLIMITED_RETRY,
    )

__all__ = ["FreezeMixin"]

# A destroy_all attempt: destroys paced 3 s apart, then up to 3 min of checks.
_DESTROY_ALL_TIMEOUT = timedelta(minutes=15)


class FreezeMixin(AgentCore):
    """The `freeze` and `unfreeze` updates of FleetAgentWorkflow."""

    # Bare decorator: see update_config.
    @workflow.update
    async def freeze(self, raw: Any) -> FreezeReport:
        """Kill switch: `{"reason", "destroy_all", "author"}`. Stops runs, the
        monitor and every fleet change; with `destroy_all`, destroys every
        machine of this agent at vast.ai and returns once none is listed."""
        req = parse_payload(FreezeRequest, raw, optional=True).value
        if req is None:
            raise ApplicationError("invalid freeze request", non_retryable=True)
        already = self._state.config.frozen
        info = FreezeInfo(
            reason=req.reason, author=req.author, at=workflow.now(), destroy_all=req.destroy_all
        )
        if not already:
            self._state.config = self._state.config.model_copy(update={"frozen": True})
            self._state.freeze = info
            if self._current_run is None:
                self._phase = self._idle_phase()  # the loop agrees once it wakes
            workflow.logger.warning("frozen by %s: %s", req.author, req.reason or "(no reason)")
            self._notify()
            # A run waiting for a human must not rent once it is approved later.
            await self._deny_all_pending(req.author, req.reason)
            self._show()
            await self._configure_monitor()  # disabled: it ends within a poll
        fleet, error = await self._stop_fleet(req.destroy_all)
        return FreezeReport(
            frozen=True,
            already_frozen=already,
            info=self._state.freeze or info,
            fleet=fleet,
            error=error,
        )

    @freeze.validator
    def _validate_freeze(self, raw: Any) -> None:
        # Refused before it reaches history: a bad request leaves no trace.
        error = parse_payload(FreezeRequest, raw, optional=True).error
        if error:
            raise ValueError(f"freeze refused: {error}")

    async def _stop_fleet(self, destroy_all: bool) -> tuple[StopFleetReport | None, str]:
        """The fleet at vast.ai (and its destruction); an error is reported, not raised."""
        try:
            report = await workflow.execute_activity(
                stubs.stop_fleet,
                StopFleetRequest(agent_id=self._agent_id, destroy_all=destroy_all),
                start_to_close_timeout=_DESTROY_ALL_TIMEOUT if destroy_all else FLEET_READ_TIMEOUT,
                heartbeat_timeout=FLEET_HEARTBEAT_TIMEOUT,
                retry_policy=UNLIMITED_RETRY if destroy_all else FLEET_RETRY,
                summary="freeze: destroy every machine and check"
                if destroy_all
                else "freeze: read the fleet",
            )
        except ActivityError as exc:
            cause = exc.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
            return (
                None,
                f"the fleet could not be {'destroyed' if destroy_all else 'read'}: {message}",
            )
        return report, ""

    @workflow.update
    async def unfreeze(self, raw: Any) -> AgentConfig:
        """Undo `freeze`: `{"reason", "author"}`. The monitor starts again and
        the next run is told, so it re-plans the fleet."""
        req = parse_payload(UnfreezeRequest, raw, optional=True).value
        if req is None:
            raise ApplicationError("invalid unfreeze request", non_retryable=True)
        if not self._state.config.frozen:
            return self._state.config
        self._state.config = self._state.config.model_copy(update={"frozen": False})
        self._state.freeze = None
        if self._current_run is None:
            self._phase = self._idle_phase()  # the loop agrees once it wakes
        why = f" ({req.reason})" if req.reason else ""
        self._buffer.add_config_change(
            self._state.next_trigger_seq,
            workflow.now(),
            f"unfrozen by {req.author}{why}: fleet changes are allowed again",
        )
        self._state.next_trigger_seq += 1
        self._notify()
        self._show()
        await self._ensure_monitor()
        return self._state.config

    @unfreeze.validator
    def _validate_unfreeze(self, raw: Any) -> None:
        error = parse_payload(UnfreezeRequest, raw, optional=True).error
        if error:
            raise ValueError(f"unfreeze refused: {error}")
