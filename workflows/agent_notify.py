"""Notifications from the agent workflow: events admitted, queued and delivered.

FleetAgentWorkflow (workflows/agent.py) calls `Notifier.emit` where something
a human should hear of happens (an approval asked, expired; a freeze; runs
failing; a key refused), handing it the config in force. The event is
admitted by the config (`notify_events`, the quiet window:
fleet_agent/notify/rules.py), keyed (agent, kind, subject, time bucket) and
queued; `Notifier.loop`, a task beside the agent's loop, hands each to the
`send_notification` activity and catches its failure: a delivery never
blocks nor fails a run. A failed delivery is kept (redacted) for `status`
and the console. The loop also owns the timers of notifications: an
approval's expiry warning and the daily digest.

`Notifier` owns the notifications' slice of the agent's state
(`AgentState.notify`, a `NotifyState`: the queue, the quiet window, the
digest's counts, the failures) and nothing else; its loop reads the rest of
the agent through the `Around` it is handed.

Touches: the activity send_notification (→ FLEET_NOTIFY_URLS, the store's
`fa_notifications`). No URL is ever in this workflow's history: the worker
holds them. New commands in running agents: only under `NOTIFY_PATCH`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules.
    from fleet_agent.models import (
        AgentConfig,
        NotifyEvent,
        NotifyEventKind,
        NotifyFailure,
        NotifyRequest,
        NotifyState,
        PendingApproval,
        SpendSummary,
    )
    from fleet_agent.notify.rules import admit, idempotency_key, remember
    from workflows import stubs
    from workflows.agent_approvals import approval_facts
    from workflows.policies import NOTIFY_RETRY, NOTIFY_TIMEOUT

__all__ = ["NOTIFY_PATCH", "Around", "Notifier"]

#: Notifications: new commands (the delivery activity, its timers) in running agents.
NOTIFY_PATCH = "notify-events"

_MAX_QUEUE = 50
_MAX_FAILURES = 10
_MAX_WARNED = 20
# An approval is warned of this long before it expires (at most half its wait).
_EXPIRY_WARNING = timedelta(minutes=10)
_DAY = timedelta(days=1)


@dataclass(frozen=True)
class Around:
    """What the notification timers read from the rest of the agent."""

    config: AgentConfig
    pending_approvals: Sequence[PendingApproval]
    spend: SpendSummary | None


class Notifier:
    """Admits events into the agent's durable queue (its `NotifyState`) and delivers them."""

    def __init__(self, agent_id: str, state: NotifyState, *, enabled: bool) -> None:
        self._agent_id = agent_id
        self._s = state
        #: From `workflow.patched(NOTIFY_PATCH)`: histories from before
        #: notifications replay without them.
        self.enabled = enabled

    # ------------------------------------------------------------ events

    def emit(
        self, config: AgentConfig, kind: NotifyEventKind, subject: str = "", /, **facts: Any
    ) -> bool:
        """Queue an event if `config` admits it now; True if it was queued."""
        if not self.enabled:
            return False
        state = self._s
        event = NotifyEvent(
            kind=kind, subject=subject[:120], at=workflow.now(), facts=_plain(facts)
        )
        if not admit(event, config, state.sent):
            return False
        state.sent = remember(event, state.sent)
        request = NotifyRequest(
            agent_id=self._agent_id,
            key=idempotency_key(self._agent_id, event, config.notify_quiet_minutes),
            event=event,
        )
        state.queue = [*state.queue[-(_MAX_QUEUE - 1) :], request]
        return True

    def count_approval(self) -> None:
        """An approval was decided (or expired): the daily digest counts it."""
        self._s.digest_approvals += 1

    def run_ended(self, config: AgentConfig, run: int, failed: bool, error: str) -> None:
        """Count a run for the digest and the failed-in-a-row rule."""
        if not self.enabled:
            return
        state = self._s
        state.digest_runs += 1
        if not failed:
            state.failed_streak = 0
            return
        state.digest_failed_runs += 1
        state.failed_streak += 1
        if state.failed_streak == config.notify_failed_runs:
            self.emit(
                config,
                "runs_failing",
                "runs",
                count=state.failed_streak,
                run=run,
                error=error[:400],
            )

    @property
    def failures(self) -> list[NotifyFailure]:
        return self._s.failures

    @property
    def delivered(self) -> int:
        return self._s.delivered

    # ------------------------------------------------------------ the loop

    async def loop(self, around: Callable[[], Around], failed: Callable[[], None]) -> None:
        """Deliver the queue, one event at a time; fire the notification timers.
        `around` is read at each step; `failed` is called after a delivery failed
        (the Web UI shows the failures)."""
        state = self._s
        if state.digest_at is None:
            state.digest_at = _next_midnight(workflow.now())
        while True:
            due = self._next_timer(around().pending_approvals)
            if not state.queue:
                now = workflow.now()
                if due is None or due > now:
                    with contextlib.suppress(TimeoutError):
                        await workflow.wait_condition(
                            functools.partial(self._woken, due, around),
                            timeout=None if due is None else due - now,
                            timeout_summary="next notification timer",
                        )
                self._fire_timers(around())
                continue
            if not await self._deliver(state.queue[0]):
                failed()
            state.queue = state.queue[1:]

    def _woken(self, due: datetime | None, around: Callable[[], Around]) -> bool:
        """Something to send, or the next timer moved (an approval came or went)."""
        return bool(self._s.queue) or self._next_timer(around().pending_approvals) != due

    async def _deliver(self, request: NotifyRequest) -> bool:
        state = self._s
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
            return False
        state.delivered += 1
        return True

    def _next_timer(self, pending_approvals: Sequence[PendingApproval]) -> datetime | None:
        """The earliest of: an approval's expiry warning, the daily digest."""
        state = self._s
        times = [state.digest_at] if state.digest_at is not None else []
        for pending in pending_approvals:
            if pending.id not in state.warned:
                times.append(_warn_at(pending.asked_at, pending.expires_at))
        return min(times, default=None)

    def _fire_timers(self, around: Around) -> None:
        state = self._s
        now = workflow.now()
        for pending in around.pending_approvals:
            if pending.id in state.warned or _warn_at(pending.asked_at, pending.expires_at) > now:
                continue
            state.warned = [*state.warned[-(_MAX_WARNED - 1) :], pending.id]
            self.emit(around.config, "approval_expiring", pending.id, **approval_facts(pending))
        if state.digest_at is not None and state.digest_at <= now:
            day = f"{state.digest_at - _DAY:%Y-%m-%d}"
            spend = around.spend
            self.emit(
                around.config,
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
