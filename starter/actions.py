"""What the operator asks of an agent, without printing: the CLI commands
(starter/cli/agent_commands.py) and the web console (starter/console/) both call these.
Messages go through starter/answers.py (`send_message`, the one sender), which
gives each an id to find its answer by.

Inputs are validated locally with the same models the workflow uses, because a
signal the workflow cannot parse is only recorded in its `rejected` list — the
operator would never see the mistake otherwise. Each function talks to
Temporal through the given `AgentClient` only.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from fleet_agent.models import (
    ApprovalDecisionRequest,
    ApprovalOutcome,
    CancelWake,
    ResetSession,
    TriggerNow,
)
from starter.agent_client import AgentClient, CliError, UsageError, validation_message

__all__ = [
    "cancel_wake",
    "decide_approval",
    "payload",
    "request_reset",
    "request_trigger",
]


def payload(model: type[BaseModel], what: str, **fields: Any) -> dict[str, Any]:
    """The signal argument, checked against the workflow's own model first
    (a `UsageError`: exit code 2 on the command line)."""
    given = {k: v for k, v in fields.items() if v is not None}
    try:
        model.model_validate(given)
    except ValidationError as exc:
        raise UsageError(f"invalid {what}: {validation_message(exc)}") from None
    return given


async def request_trigger(agent: AgentClient, reason: str | None) -> bool:
    """Signal `trigger_now` (starting the agent if needed); True if it was started."""
    arg = payload(TriggerNow, "trigger", reason=reason)
    return await agent.signal_with_start("trigger_now", arg)


async def request_reset(agent: AgentClient, reason: str | None) -> None:
    """Signal `reset_session` to the running agent."""
    arg = payload(ResetSession, "reset", reason=reason)
    await agent.signal("reset_session", arg)


async def cancel_wake(agent: AgentClient, wake_id: str) -> None:
    """Signal `cancel_wake` for a wake the agent has (its status tells); an
    unknown wake is a `CliError` naming the pending ones."""
    arg = payload(CancelWake, "wake id", wake_id=wake_id)
    st = await agent.status()
    ids = [w.id for w in st.wakes]
    if wake_id not in ids:
        pending = ", ".join(ids) if ids else "none"
        raise CliError(
            f"agent {agent.agent_id!r} has no pending wake {wake_id!r} (pending: {pending})"
        )
    await agent.signal("cancel_wake", arg)


async def decide_approval(
    agent: AgentClient, approval_id: str, approve: bool, note: str | None, author: str
) -> ApprovalOutcome:
    """The `decide_approval` update; the workflow refuses an unknown ID (a `CliError`)."""
    request = payload(
        ApprovalDecisionRequest,
        "approve" if approve else "deny",
        approval_id=approval_id,
        approve=approve,
        note=note or "",
        author=author,
    )
    return await agent.decide_approval(request)
