"""The kill switch of FleetAgentWorkflow: who froze the agent, and its fleet's stop.

Decisions (docs/DECISIONS.md, "The kill switch"): a freeze takes effect
before its update returns — no run starts, the monitor stops, and every
mutating tool call is refused from then on, the current run's included (the
tools read the live config). With `destroy_all` the update waits until vast.ai
no longer lists any machine of the agent (activity stop_fleet, retried
without limit), so the answer the operator gets is the truth. `unfreeze`
restarts the monitor and queues a config-change trigger, so the next run
re-plans the fleet.

`KillSwitch` owns the freeze's slice of the agent's state (`FreezeSlice`:
who froze it, when, why) and runs `stop_fleet`. Handed the config in force,
it returns the config that follows (`frozen` set or cleared), or None when
nothing changes; FleetAgentWorkflow (workflows/agent.py) declares the
updates and does the rest (approvals, monitor, notification, trigger).
Touches: the activity stop_fleet (→ vast.ai). Deterministic: workflow code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules only.
    from fleet_agent.loop.inputs import parse_payload
    from fleet_agent.models import (
        AgentConfig,
        FreezeInfo,
        FreezeRequest,
        StopFleetReport,
        StopFleetRequest,
        UnfreezeRequest,
    )
    from workflows import stubs
    from workflows.policies import (
        FLEET_HEARTBEAT_TIMEOUT,
        FLEET_READ_TIMEOUT,
        FLEET_RETRY,
        UNLIMITED_RETRY,
    )

__all__ = ["FreezeSlice", "KillSwitch", "Unfrozen"]

# A destroy_all attempt: destroys paced 3 s apart, then up to 3 min of checks.
_DESTROY_ALL_TIMEOUT = timedelta(minutes=15)


class FreezeSlice(Protocol):
    """The freeze's slice of the durable state (a field of `AgentState`);
    `AgentConfig.frozen` says the same, in the config the workflow holds."""

    freeze: FreezeInfo | None


@dataclass(frozen=True)
class Unfrozen:
    """What an unfreeze changed: the config, and the news for the next run."""

    config: AgentConfig
    news: str


class KillSwitch:
    """Freezing and unfreezing: the `FreezeSlice`, and the fleet's stop."""

    def __init__(self, slice_: FreezeSlice, agent_id: str) -> None:
        self._s = slice_
        self._agent_id = agent_id

    @property
    def info(self) -> FreezeInfo | None:
        """Who froze the agent, when and why (None: not frozen)."""
        return self._s.freeze

    def freeze(self, info: FreezeInfo, config: AgentConfig) -> AgentConfig | None:
        """Freeze by `info`: the frozen config, or None when it was frozen already."""
        if config.frozen:
            return None
        self._s.freeze = info
        workflow.logger.warning("frozen by %s: %s", info.author, info.reason or "(no reason)")
        return config.model_copy(update={"frozen": True})

    def unfreeze(self, req: UnfreezeRequest, config: AgentConfig) -> Unfrozen | None:
        """Undo a freeze (None: it was not frozen)."""
        if not config.frozen:
            return None
        self._s.freeze = None
        why = f" ({req.reason})" if req.reason else ""
        return Unfrozen(
            config=config.model_copy(update={"frozen": False}),
            news=f"unfrozen by {req.author}{why}: fleet changes are allowed again",
        )

    def kept_frozen(self, config: AgentConfig) -> None:
        """A restart recalled a frozen config: the kill switch holds across it,
        and shows as such."""
        if config.frozen and self._s.freeze is None:
            self._s.freeze = FreezeInfo(
                reason="frozen before the agent ended (its kept config says so)",
                author="the store",
                at=workflow.now(),
            )

    async def stop_fleet(self, destroy_all: bool) -> tuple[StopFleetReport | None, str]:
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

    @staticmethod
    def validate_freeze(raw: Any) -> None:
        """Refused before it reaches history: a bad request leaves no trace."""
        error = parse_payload(FreezeRequest, raw, optional=True).error
        if error:
            raise ValueError(f"freeze refused: {error}")

    @staticmethod
    def validate_unfreeze(raw: Any) -> None:
        error = parse_payload(UnfreezeRequest, raw, optional=True).error
        if error:
            raise ValueError(f"unfreeze refused: {error}")
