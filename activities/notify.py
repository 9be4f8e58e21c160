"""The delivery of notifications: `send_notification`, through apprise.

Touches: the store (`fa_notifications`, the idempotency keys; the digest's
proofs from `fa_proof_days`), every destination in `FLEET_NOTIFY_URLS` (the
worker's environment only: no URL ever reaches a workflow, the store, a log
line or an error), the notify key file when `FLEET_NOTIFY_KEY` is unset
(read, or made once), and the `fleet_notifications_total` counter.

Each destination is claimed in the store under the request's key before it is
sent to, and its outcome recorded after (fleet_agent/store/notifications.py),
named by a keyed hash of its URL under the worker's notify key
(`FLEET_NOTIFY_KEY`, else the key file beside a SQLite store or in var/,
which the first delivery makes: fleet_agent/notify/destinations.py; it also
renames the rows of the unkeyed names written before):
a retry sends only to the destinations that failed, and a replayed or handed
over (continue-as-new) request sends nothing that went out. A failure is a
retryable ApplicationError whose message names destinations by scheme and
host; the agent workflow catches the last one and shows it in `status`.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.metrics import record_notification
from fleet_agent.models import NotifyRequest, NotifyResult
from fleet_agent.notify.deliver import UNUSABLE, send_one
from fleet_agent.notify.destinations import (
    KEY_ENV,
    destination_name,
    is_legacy_name,
    key_file_for,
    legacy_name,
    load_key,
    retired_name,
)
from fleet_agent.notify.render import render
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import Notifications, ProofDays, Store

__all__ = ["NotifyActivities"]

log = logging.getLogger(__name__)


class NotifyActivities:
    """Holds the store and the destinations (read once, at the worker's
    start), and their names in the store (made on the first delivery)."""

    def __init__(
        self, store: Store, env: NotifyEnv | None = None, key_file: Path | None = None
    ) -> None:
        self._book = Notifications(store)
        self._proof_days = ProofDays(store)
        self._env = env or NotifyEnv()
        url = store.engine.url
        self._key_file = key_file or key_file_for(url.get_backend_name(), url.database)
        self._several_workers = url.get_backend_name() == "postgresql"
        self._names: dict[str, str] | None = None
        self._naming = asyncio.Lock()

    async def _destination_names(self, urls: list[str]) -> dict[str, str]:
        """URL → its name in the store, under the notify key; the first call
        loads (or makes) the key and renames the rows of unkeyed names."""
        async with self._naming:
            if self._names is None:
                self._names = await asyncio.to_thread(self._prepare_names, urls)
            return self._names

    def _prepare_names(self, urls: list[str]) -> dict[str, str]:
        try:
            key, source = load_key(self._env.key, self._key_file)
        except (OSError, ValueError) as exc:
            # The operator's to fix (a folder the worker may not write, a
            # damaged file): retrying cannot help.
            raise ApplicationError(
                f"no notify key: {exc} (set {KEY_ENV})", type="NotifyKey", non_retryable=True
            ) from None
        if source != KEY_ENV and self._several_workers:
            log.warning(
                "%s is not set: notification destinations are named under %s of this "
                "machine; give every worker the same %s, or a retry on another worker "
                "sends again",
                KEY_ENV,
                source,
                KEY_ENV,
            )
        names = {url: destination_name(key, url) for url in urls}
        renamed = self._book.rename_destinations(
            {legacy_name(url): name for url, name in names.items()},
            is_legacy_name,
            lambda old: retired_name(key, old),
        )
        if renamed:
            log.info("notifications: %d delivery row(s) renamed to keyed names", renamed)
        return names

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
        names = await self._destination_names(urls)
        for url in urls:
            dest = names[url]
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
