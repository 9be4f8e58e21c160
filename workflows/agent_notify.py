"""Notifications from the agent workflow: events admitted, queued and delivered.

The workflow's helpers call `Notifier.emit` where something a human should
hear of happens (an approval asked, expired; a freeze; runs failing; a key
refused). The event is admitted by the config (`notify_events`, the quiet
window: fleet_agent/notify/rules.py), keyed (agent, kind, subject, time
bucket) and queued in the durable state; `Notifier.loop`, a task beside the
agent's loop, hands each to the `send_notification` activity and catches its
failure: a delivery never blocks nor fails a run. A failed delivery is kept
(redacted) for `status` and the console. The loop also owns the timers of
notifications: an approval's expiry warning and the daily digest.

Touches: the activity send_notification (→ FLEET_NOTIFY_URLS, the store's
`fa_notifications`). No URL is ever in this workflow's history: the worker
holds them. New commands in running agents: only under `NOTIFY_PATCH`.
"""

from __future__ import annotations

import contextlib
import functools
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules.
    from fleet_agent.models import NotifyEvent, NotifyEventKind, NotifyFailure, NotifyRequest
    from fleet_agent.notify.rules import admit, idempotency_key, remember
    from workflows import stubs
    from workflows.agent_approvals import approval_facts
    from workflows.agent_state import AgentExecution
    from workflows.policies import NOTIFY_RETRY, NOTIFY_TIMEOUT

__all__ = ["NOTIFY_PATCH", "Notifier"]

#: Notifications: new commands (the delivery activity, its timers) in running agents.
NOTIFY_PATCH = "notify-events"

_MAX_QUEUE = 50
_MAX_FAILURES = 10
_MAX_WARNED = 20
# An approval is warned of this long before it expires (at most half its wait).
_EXPIRY_WARNING = timedelta(minutes=10)
_DAY = timedelta(days=1)


class Notifier:
    """Admits events into the agent's durable queue and delivers them."""

    def __init__(self, ex: AgentExecution) -> None:
        self._ex = ex
        #: Set by the workflow from `workflow.patched(NOTIFY_PATCH)`: histories
        #: from before notifications replay without them.
        self.enabled = False

    # ------------------------------------------------------------ events

    def emit(self, kind: NotifyEventKind, subject: str = "", **facts: Any) -> bool:
        """Queue an event if the config admits it now; True if it was queued."""
        if not self.enabled:
            return False
        ex = self._ex
        state, config = ex.state.notify, ex.state.config
        event = NotifyEvent(
            kind=kind, subject=subject[:120], at=workflow.now(), facts=_plain(facts)
        )
        if not admit(event, config, state.sent):
            return False
        state.sent = remember(event, state.sent)
        request = NotifyRequest(
            agent_id=ex.agent_id,
            key=idempotency_key(ex.agent_id, event, config.notify_quiet_minutes),
            event=event,
        )
        state.queue = [*state.queue[-(_MAX_QUEUE - 1) :], request]
        return True

    def run_ended(self, run: int, failed: bool, error: str) -> None:
        """Count a run for the digest and the failed-in-a-row rule."""
        if not self.enabled:
            return
        state = self._ex.state.notify
        state.digest_runs += 1
        if not failed:
            state.failed_streak = 0
            return
        state.digest_failed_runs += 1
        state.failed_streak += 1
        if state.failed_streak == self._ex.state.config.notify_failed_runs:
            self.emit("runs_failing", "runs", count=state.failed_streak, run=run, error=error[:400])

    def agent_restarted(self, how_ended: str, *, by_watchdog: bool = True) -> bool:
        """For the watchdog's restart (a fresh start of a terminated agent):
        "restarted by the watchdog", how it had ended, the next run number.
        Call it after the run numbering continued from the store."""
        return self.emit(
            "agent_restarted",
            "watchdog",
            how_ended=how_ended[:300],
            by="the watchdog" if by_watchdog else "a start request",
            next_run=self._ex.state.run_count + 1,
        )

    # ------------------------------------------------------------ the loop

    async def loop(self) -> None:
        """Deliver the queue, one event at a time; fire the notification timers."""
        ex = self._ex
        state = ex.state.notify
        if state.digest_at is None:
            state.digest_at = _next_midnight(workflow.now())
        while True:
            due = self._next_timer()
            if not state.queue:
                now = workflow.now()
                if due is None or due > now:
                    with contextlib.suppress(TimeoutError):
                        await workflow.wait_condition(
                            functools.partial(self._woken, due),
                            timeout=None if due is None else due - now,
                            timeout_summary="next notification timer",
                        )
                self._fire_timers()
                continue
            await self._deliver(state.queue[0])
            state.queue = state.queue[1:]

    def _woken(self, due: datetime | None) -> bool:
        """Something to send, or the next timer moved (an approval came or went)."""
        return bool(self._ex.state.notify.queue) or self._next_timer() != due

    async def _deliver(self, request: NotifyRequest) -> None:
        state = self._ex.state.notify
        event = request.event
        try:
            await workflow.execute_activity(
                stubs.send_notification,
                request,
                start_to_close_timeout=NOTIFY_TIMEOUT,
                retry_policy=NOTIFY_RETRY,
                summary=f"notify: {event.kind} {event.subject}".strip(),
            )
        except ActivityError as exc:
            cause = exc.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
            workflow.logger.warning("notification %s not delivered: %s", event.kind, message)
            state.failures = [
                *state.failures[-(_MAX_FAILURES - 1) :],
                NotifyFailure(
                    at=workflow.now(), kind=event.kind, subject=event.subject, error=message
                ),
            ]
            self._ex.show()
            return
        state.delivered += 1

    def _next_timer(self) -> datetime | None:
        """The earliest of: an approval's expiry warning, the daily digest."""
        state = self._ex.state.notify
        times = [state.digest_at] if state.digest_at is not None else []
        for pending in self._ex.state.pending_approvals:
            if pending.id not in state.warned:
                times.append(_warn_at(pending.asked_at, pending.expires_at))
        return min(times, default=None)

    def _fire_timers(self) -> None:
        ex = self._ex
        state = ex.state.notify
        now = workflow.now()
        for pending in ex.state.pending_approvals:
            if pending.id in state.warned or _warn_at(pending.asked_at, pending.expires_at) > now:
                continue
            state.warned = [*state.warned[-(_MAX_WARNED - 1) :], pending.id]
            self.emit("approval_expiring", pending.id, **approval_facts(pending))
        if state.digest_at is not None and state.digest_at <= now:
            day = f"{state.digest_at - _DAY:%Y-%m-%d}"
            spend = ex.state.spend
            self.emit(
                "daily_digest",
                day,
                spend_today=spend.today_usd if spend else 0.0,
                spend_24h=spend.last_24h_usd if spend else 0.0,
                runs=state.digest_runs,
                failed_runs=state.digest_failed_runs,
                approvals=state.digest_approvals,
            )
            state.digest_runs = state.digest_failed_runs = state.digest_approvals = 0
            state.digest_at = _next_midnight(now)


def _warn_at(asked: datetime, expires: datetime) -> datetime:
    return expires - min(_EXPIRY_WARNING, (expires - asked) / 2)


def _next_midnight(now: datetime) -> datetime:
    return datetime.combine(now.date() + _DAY, datetime.min.time(), tzinfo=now.tzinfo)


def _plain(facts: dict[str, Any]) -> dict[str, Any]:
    """Facts as JSON values (a datetime as ISO text)."""
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in facts.items()}
