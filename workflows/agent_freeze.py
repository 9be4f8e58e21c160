"""The kill switch of FleetAgentWorkflow: what its `freeze` and `unfreeze` updates do.

Decisions (docs/DECISIONS.md, "The kill switch"): a freeze takes effect
before its update returns — no run starts, the monitor stops, and every
mutating tool call is refused from then on, the current run's included (the
tools read the live config). With `destroy_all` the update waits until vast.ai
no longer lists any machine of the agent (activity stop_fleet, retried
without limit), so the answer the operator gets is the truth. `unfreeze`
restarts the monitor and queues a config-change trigger, so the next run
re-plans the fleet. The updates are declared on the workflow
(workflows/agent.py); `KillSwitch` holds their logic.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules only.
    from fleet_agent.loop.inputs import parse_payload
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
    from workflows.agent_approvals import ApprovalsBook, tell_run
    from workflows.agent_monitor import MonitorLink
    from workflows.agent_state import AgentExecution
    from workflows.policies import (
        FLEET_HEARTBEAT_TIMEOUT,
        FLEET_READ_TIMEOUT,
        FLEET_RETRY,
        UNLIMITED_RETRY,
    )

__all__ = ["KillSwitch"]

# A destroy_all attempt: destroys paced 3 s apart, then up to 3 min of checks.
_DESTROY_ALL_TIMEOUT = timedelta(minutes=15)


class KillSwitch:
    """Freezing and unfreezing the agent: its config, its approvals, its monitor, its fleet."""

    def __init__(self, ex: AgentExecution, approvals: ApprovalsBook, monitor: MonitorLink) -> None:
        self._ex = ex
        self._approvals = approvals
        self._monitor = monitor

    async def freeze(self, raw: Any) -> FreezeReport:
        """Stop runs, the monitor and every fleet change; with `destroy_all`,
        destroy every machine of this agent and return once none is listed."""
        ex = self._ex
        req = parse_payload(FreezeRequest, raw, optional=True).value
        if req is None:
            raise ApplicationError("invalid freeze request", non_retryable=True)
        already = ex.state.config.frozen
        info = FreezeInfo(
            reason=req.reason, author=req.author, at=workflow.now(), destroy_all=req.destroy_all
        )
        if not already:
            ex.state.config = ex.state.config.model_copy(update={"frozen": True})
            ex.state.freeze = info
            if ex.current_run is None:
                ex.phase = ex.idle_phase()  # the loop agrees once it wakes
            workflow.logger.warning("frozen by %s: %s", req.author, req.reason or "(no reason)")
            ex.notifier.emit(
                "frozen", "", author=req.author, reason=req.reason, destroy_all=req.destroy_all
            )
            ex.notify()
            # A run waiting for a human must not rent once it is approved later.
            for decided in self._approvals.deny_all(req.author, req.reason):
                ex.state.notify.digest_approvals += 1
                await tell_run(decided)
            ex.show()
            await self._monitor.configure()  # disabled: it ends within a poll
        fleet, error = await self._stop_fleet(req.destroy_all)
        return FreezeReport(
            frozen=True,
            already_frozen=already,
            info=ex.state.freeze or info,
            fleet=fleet,
            error=error,
        )

    @staticmethod
    def validate_freeze(raw: Any) -> None:
        """Refused before it reaches history: a bad request leaves no trace."""
        error = parse_payload(FreezeRequest, raw, optional=True).error
        if error:
            raise ValueError(f"freeze refused: {error}")

    async def _stop_fleet(self, destroy_all: bool) -> tuple[StopFleetReport | None, str]:
        """The fleet at vast.ai (and its destruction); an error is reported, not raised."""
        try:
            report = await workflow.execute_activity(
                stubs.stop_fleet,
                StopFleetRequest(agent_id=self._ex.agent_id, destroy_all=destroy_all),
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

    async def unfreeze(self, raw: Any) -> AgentConfig:
        """Undo a freeze: the monitor starts again and the next run is told,
        so it re-plans the fleet."""
        ex = self._ex
        req = parse_payload(UnfreezeRequest, raw, optional=True).value
        if req is None:
            raise ApplicationError("invalid unfreeze request", non_retryable=True)
        if not ex.state.config.frozen:
            return ex.state.config
        ex.state.config = ex.state.config.model_copy(update={"frozen": False})
        ex.state.freeze = None
        if ex.current_run is None:
            ex.phase = ex.idle_phase()  # the loop agrees once it wakes
        why = f" ({req.reason})" if req.reason else ""
        ex.notifier.emit("unfrozen", "", author=req.author, reason=req.reason)
        ex.buffer.add_config_change(
            ex.state.next_trigger_seq,
            workflow.now(),
            f"unfrozen by {req.author}{why}: fleet changes are allowed again",
        )
        ex.state.next_trigger_seq += 1
        ex.notify()
        ex.show()
        await self._monitor.ensure()
        return ex.state.config

    @staticmethod
    def validate_unfreeze(raw: Any) -> None:
        error = parse_payload(UnfreezeRequest, raw, optional=True).error
        if error:
            raise ValueError(f"unfreeze refused: {error}")
