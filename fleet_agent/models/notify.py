"""Payloads of notifications: the events that tell a human, and what their delivery reports.

The agent workflow builds a `NotifyEvent` where something happens (an
approval asked, a freeze, runs failing ...), admits it by the rules of
fleet_agent/notify/rules.py and hands it to the `send_notification` activity
(activities/notify.py), which renders it (fleet_agent/notify/render.py) and
sends it to every `FLEET_NOTIFY_URLS` destination. No URL ever enters these
models: they cross workflow history.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from pydantic import Field

from fleet_agent.wire import Wire

__all__ = [
    "DEFAULT_NOTIFY_EVENTS",
    "NOTIFY_EVENT_KINDS",
    "NotifyEvent",
    "NotifyEventKind",
    "NotifyFailure",
    "NotifyRequest",
    "NotifyResult",
    "NotifyState",
    "RunNotice",
]

NotifyEventKind = Literal[
    "approval_requested",
    "approval_expiring",
    "approval_expired",
    "under_target",
    "back_in_band",
    "create_refused",
    "frozen",
    "unfrozen",
    "runs_failing",
    "auth_failing",
    "agent_restarted",
    "llm_spend_capped",
    "market_loss",
    "daily_digest",
    "test",
]
"""Every kind of event that can notify (docs/operations/alerts.md, "Alerts: Slack, e-mail
and more")."""

NOTIFY_EVENT_KINDS: tuple[str, ...] = get_args(NotifyEventKind)

#: What notifies by default: every event that needs a human. The daily digest
#: and "back in band" are good news, the operator turns them on.
DEFAULT_NOTIFY_EVENTS: tuple[NotifyEventKind, ...] = (
    "approval_requested",
    "approval_expiring",
    "approval_expired",
    "under_target",
    "create_refused",
    "frozen",
    "unfrozen",
    "runs_failing",
    "auth_failing",
    "agent_restarted",
    "llm_spend_capped",
    "market_loss",
)


class NotifyEvent(Wire):
    """Something a human should hear of. `subject` names what it is about
    (an approval id, a provider, a date): the quiet window and the idempotency
    key are per (kind, subject). `facts` are the figures the text shows."""

    kind: NotifyEventKind
    subject: str = ""
    at: datetime
    facts: dict[str, Any] = Field(default_factory=dict)


class NotifyRequest(Wire):
    """One delivery: the event, its agent and its idempotency key
    (agent, kind, subject, time bucket: fleet_agent/notify/rules.py)."""

    agent_id: str
    key: Annotated[str, Field(max_length=300)]
    event: NotifyEvent


class NotifyResult(Wire):
    """What a delivery did: destinations sent to now, those sent before under
    the same key (a retry, a replay), and those that failed (redacted)."""

    sent: int = 0
    already_sent: int = 0
    failed: list[str] = Field(default_factory=list)
    configured: int = 0


class NotifyFailure(Wire):
    """A delivery that failed after its retries: shown in `status` and the console."""

    at: datetime
    kind: str
    subject: str = ""
    error: str


class NotifyState(Wire):
    """What the agent workflow keeps for notifications (in `AgentState.notify`,
    handed on by continue-as-new): bounded lists only."""

    # When each (kind, subject) pair last notified: the quiet window.
    sent: dict[str, datetime] = Field(default_factory=dict)
    # Admitted, not delivered yet: sent again by the next execution after a
    # continue-as-new (the store's key makes that a no-op if it went out).
    queue: list[NotifyRequest] = Field(default_factory=list)
    failures: list[NotifyFailure] = Field(default_factory=list)
    delivered: int = 0
    # Approvals already warned of their expiry.
    warned: list[str] = Field(default_factory=list)
    # Failed runs in a row, and whether that streak has notified.
    failed_streak: int = 0
    # Since when the fleet is below target (None: in band), and whether it notified.
    under_since: datetime | None = None
    under_notified: bool = False
    # The next daily digest, and the counts since the last one.
    digest_at: datetime | None = None
    digest_runs: int = 0
    digest_failed_runs: int = 0
    digest_approvals: int = 0


class RunNotice(Wire):
    """Something a run saw that notifies (a create refused, a key rejected),
    carried in its `RunResult` for the agent to emit."""

    kind: NotifyEventKind
    subject: str = ""
    text: str = ""
