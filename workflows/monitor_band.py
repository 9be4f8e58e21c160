"""The fleet against its target, for notifications: the monitor's part.

After each poll the monitor (workflows/monitor.py) steps the band rule
(fleet_agent/notify/rules.py, `band_step`): below target for
`notify_under_target_minutes` notifies once, back in band after that notifies
once. The monitor sees every poll, so it owns this rule rather than the agent,
which sees the fleet only in runs; and a poll vast.ai refused for the key
(`auth_failing`, once until a poll succeeds), which no run may be there to
see. The delivery is awaited with its failure caught (logged, counted by the
activity's metric): a poll never fails for it.

Touches: the activity send_notification (→ FLEET_NOTIFY_URLS, the store's keys).
New commands only under `MONITOR_NOTIFY_PATCH`. Deterministic: workflow code.
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules.
    from fleet_agent.fleet.snapshot import FleetSnapshot
    from fleet_agent.models import MonitorConfig, NotifyEvent, NotifyRequest
    from fleet_agent.notify.rules import band_step, idempotency_key
    from workflows import stubs
    from workflows.policies import NOTIFY_RETRY, NOTIFY_TIMEOUT

__all__ = [
    "MONITOR_NOTIFY_PATCH",
    "Band",
    "send_event",
]

#: Monitors that record it notify below target and back in band.
MONITOR_NOTIFY_PATCH = "monitor-notify"


class Band:
    """Since when the fleet is below target, and whether it notified; whether
    a refused key was told since the last poll that succeeded."""

    def __init__(self, under_since: datetime | None, notified: bool) -> None:
        self.under_since = under_since
        self.notified = notified
        self.auth_notified = False

    async def after_poll(self, agent_id: str, config: MonitorConfig, snap: FleetSnapshot) -> None:
        self.auth_notified = False
        now = workflow.now()
        since = self.under_since
        step = band_step(
            since,
            self.notified,
            capacity=snap.capacity_proofs_per_hour,
            target=snap.target_proofs_per_hour,
            now=now,
            after_minutes=config.notify_under_target_minutes,
        )
        self.under_since, self.notified = step.under_since, step.notified
        if step.event is None or step.event not in config.notify_events:
            return
        began = step.under_since or since or now
        event = NotifyEvent.model_validate(
            {
                "kind": step.event,
                "subject": "fleet",
                "at": now,
                "facts": {
                    "capacity": snap.capacity_proofs_per_hour,
                    "target": snap.target_proofs_per_hour,
                    "since": began.isoformat(),
                    "minutes": round((now - began).total_seconds() / 60),
                },
            }
        )
        await send_event(agent_id, config, event)

    async def after_failed_poll(self, agent_id: str, config: MonitorConfig, cause: object) -> None:
        """A poll vast.ai refused for the worker's key: `auth_failing`, once
        until a poll succeeds again (the runs tell their own refusals)."""
        if self.auth_notified or not _vast_auth(cause):
            return
        self.auth_notified = True
        if "auth_failing" not in config.notify_events:
            return
        event = NotifyEvent.model_validate(
            {
                "kind": "auth_failing",
                "subject": "vast.ai",
                "at": workflow.now(),
                "facts": {"error": str(cause)[:400], "where": "the fleet monitor's poll"},
            }
        )
        await send_event(agent_id, config, event)


def _vast_auth(cause: object) -> bool:
    """The poll's failure is vast.ai refusing the key: the type the activities
    give it (activities/fleet_results.py, `vast_failure`)."""
    return isinstance(cause, ApplicationError) and cause.type == "VastAuthFailed"


async def send_event(agent_id: str, config: MonitorConfig, event: NotifyEvent) -> None:
    """Deliver one event; a failure is logged (the activity counts it), never raised."""
    request = NotifyRequest(
        agent_id=agent_id,
        key=idempotency_key(agent_id, event, config.notify_quiet_minutes),
        event=event,
    )
    try:
        await workflow.execute_activity(
            stubs.send_notification,
            request,
            start_to_close_timeout=NOTIFY_TIMEOUT,
            retry_policy=NOTIFY_RETRY,
            summary=f"notify: {event.kind}",
        )
    except ActivityError as exc:
        workflow.logger.warning("notification %s not delivered: %s", event.kind, exc.cause)
