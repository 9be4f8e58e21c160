"""The delivery of notifications: `send_notification`, through apprise.

Touches: the store (`fa_notifications`, the idempotency keys; the digest's
proofs from `fa_proof_days`), every
destination in `FLEET_NOTIFY_URLS` (the worker's environment only: no URL
ever reaches a workflow, the store, a log line or an error), and the
`fleet_notifications_total` counter.

Each destination is claimed in the store under the request's key before it is
sent to, and its outcome recorded after (fleet_agent/store/notifications.py):
a retry sends only to the destinations that failed, and a replayed or handed
over (continue-as-new) request sends nothing that went out. A failure is a
retryable ApplicationError whose message names destinations by scheme and
host; the agent workflow catches the last one and shows it in `status`.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.metrics import record_notification
from fleet_agent.models import NotifyRequest, NotifyResult
from fleet_agent.notify.deliver import UNUSABLE, send_one
from fleet_agent.notify.render import render
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import Notifications, ProofDays, Store

__all__ = ["NotifyActivities", "destination_id"]


def destination_id(url: str) -> str:
    """A destination's name in the store: a short hash, never the URL."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


class NotifyActivities:
    """Holds the store and the destinations (read once, at the worker's start)."""

    def __init__(self, store: Store, env: NotifyEnv | None = None) -> None:
        self._book = Notifications(store)
        self._proof_days = ProofDays(store)
        self._env = env or NotifyEnv()

    @activity.defn(name="send_notification")
    async def send_notification(self, req: NotifyRequest) -> NotifyResult:
        """Send one event to every destination that has not had it under its key."""
        urls = self._env.url_list()
        result = NotifyResult(configured=len(urls))
        if not urls:
            return result
        event = req.event
        if event.kind == "daily_digest" and "proofs" not in event.facts:
            # The day the digest reports on is its subject; the monitor's polls
            # counted its proofs in the store, which the workflow cannot read.
            proofs = await asyncio.to_thread(self._proof_days.on, req.agent_id, event.subject)
            event = event.model_copy(update={"facts": {**event.facts, "proofs": proofs}})
        message = render(req.agent_id, event, self._env.console_url)
        for url in urls:
            dest = destination_id(url)
            now = datetime.now(UTC)
            claimed = await asyncio.to_thread(
                self._book.claim, req.key, dest, req.agent_id, req.event.kind, now
            )
            if not claimed:
                result.already_sent += 1
                record_notification(req.agent_id, req.event.kind, "duplicate")
                continue
            try:
                error = await send_one(url, message)
            except BaseException:
                # Cancelled or worse mid-send: let a retry claim it again.
                await asyncio.to_thread(
                    self._book.record, req.key, dest, "interrupted", datetime.now(UTC)
                )
                raise
            await asyncio.to_thread(self._book.record, req.key, dest, error, datetime.now(UTC))
            record_notification(req.agent_id, req.event.kind, "failed" if error else "sent")
            if error:
                result.failed.append(error)
            else:
                result.sent += 1
        if result.failed:
            raise ApplicationError(
                f"{len(result.failed)} of {len(urls)} destination(s) failed: "
                + "; ".join(result.failed),
                type="NotifyFailed",
                # A URL apprise cannot use stays so: retrying cannot help.
                non_retryable=all(UNUSABLE in f for f in result.failed),
            )
        return result
