"""The delivery activity on its own (the SDK's ActivityEnvironment, a real
store, a real webhook receiver): a retried attempt or a replayed request
sends nothing twice, a retry sends only to the destination that failed, and
a failure names destinations by scheme and host only. Also the store's
version 7 → 8 migration, which adds the table of keys.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.notify import NotifyActivities
from fleet_agent.models import NotifyEvent, NotifyRequest
from fleet_agent.notify.destinations import destination_name
from fleet_agent.notify.rules import idempotency_key
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import SCHEMA_VERSION, Notifications, Store
from testkit.notify_receivers import SmtpReceiver, WebhookReceiver
from tests.helpers.ports import free_port
from tests.helpers.store_backends import Backend, backend

__all__ = ["backend"]  # the fixture, imported for pytest

AT = datetime(2026, 12, 6, 9, 30, tzinfo=UTC)


def _request(subject: str = "a1-1") -> NotifyRequest:
    event = NotifyEvent(
        kind="approval_requested",
        subject=subject,
        at=AT,
        facts={"tool": "create_instance", "dph": 0.3, "reason": "r", "expires_at": AT.isoformat()},
    )
    return NotifyRequest(agent_id="a", key=idempotency_key("a", event, 30), event=event)


KEY = "delivery-test-notify-key"


def _activity(store: Store, *urls: str) -> NotifyActivities:
    env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": ",".join(urls), "FLEET_NOTIFY_KEY": KEY})
    return NotifyActivities(store, env)


async def test_a_retried_or_replayed_delivery_posts_once(store: Store) -> None:
    with WebhookReceiver() as hook:
        acts = _activity(store, hook.url("h"))
        env = ActivityEnvironment()
        first = await env.run(acts.send_notification, _request())
        # The same request again: a retry after a lost answer, a replayed
        # workflow task, the next execution after a continue-as-new.
        again = await env.run(acts.send_notification, _request())
        assert (first.sent, first.already_sent) == (1, 0)
        assert (again.sent, again.already_sent) == (0, 1)
        assert len(hook.posts) == 1
        # Another approval is another key.
        await env.run(acts.send_notification, _request("a1-2"))
        assert len(hook.posts) == 2


async def test_a_retry_sends_only_to_the_destination_that_failed(store: Store) -> None:
    port = free_port()
    dead = f"json://127.0.0.1:{port}/tok-SECRET-abcdef"
    with WebhookReceiver() as hook:
        acts = _activity(store, hook.url("h"), dead)
        env = ActivityEnvironment()
        with pytest.raises(ApplicationError) as failed:
            await env.run(acts.send_notification, _request())
        message = failed.value.message
        assert "1 of 2 destination(s) failed" in message
        assert "json://127.0.0.1" in message and "SECRET" not in message
        assert not failed.value.non_retryable
        book = Notifications(store)
        key = _request().key
        assert book.status_of(key) == {
            destination_name(KEY.encode(), hook.url("h")): "sent",
            destination_name(KEY.encode(), dead): "failed",
        }
        # The retry: the dead one is alive now; the live one is not sent again.
        with WebhookReceiver() as revived:
            acts = _activity(store, hook.url("h"), revived.url("x"))
            # (its URL changed with its port: a new destination, sent once)
            result = await env.run(acts.send_notification, _request())
            assert (result.sent, result.already_sent) == (1, 1)
            assert len(hook.posts) == 1 and len(revived.posts) == 1


async def test_a_claim_is_taken_once_and_a_failure_can_be_claimed_again(store: Store) -> None:
    book = Notifications(store)
    assert book.claim("k", "d", "a", "frozen", AT)
    assert not book.claim("k", "d", "a", "frozen", AT)  # a second attempt at once
    book.record("k", "d", "json://h: refused", AT)
    assert book.claim("k", "d", "a", "frozen", AT)  # a retry after the failure
    book.record("k", "d", "", AT)
    assert not book.claim("k", "d", "a", "frozen", AT)
    assert book.recent_failures("a") == []


async def test_a_url_apprise_cannot_use_is_not_retried(store: Store) -> None:
    acts = _activity(store, "nosuchscheme://host.example.com/SECRET-part")
    with pytest.raises(ApplicationError) as failed:
        await ActivityEnvironment().run(acts.send_notification, _request())
    assert failed.value.non_retryable
    assert "nosuchscheme://host.example.com: not an apprise URL" in failed.value.message
    assert "SECRET" not in failed.value.message


async def test_a_mail_to_two_recipients_is_one_destination(store: Store) -> None:
    """`FLEET_NOTIFY_URLS` is split as apprise splits it: the comma between
    two recipients of one mailto:// is no separator."""
    with SmtpReceiver(free_port()) as smtp, WebhookReceiver() as hook:
        env = NotifyEnv.model_validate(
            {"FLEET_NOTIFY_URLS": f"{smtp.url('a@example.com,b@example.com')}, {hook.url('h')}"}
        )
        result = await ActivityEnvironment().run(
            NotifyActivities(store, env).send_notification, _request()
        )
        assert (result.configured, result.sent) == (2, 2)
        # apprise sends each recipient a mail of its own.
        assert sorted(r for m in smtp.mails for r in m.recipients) == [
            "a@example.com",
            "b@example.com",
        ]
        assert len(hook.posts) == 1


async def test_no_destination_sends_nothing_and_succeeds(store: Store) -> None:
    result = await ActivityEnvironment().run(_activity(store).send_notification, _request())
    assert (result.configured, result.sent) == (0, 0)


def test_a_version_7_store_gains_the_notification_table(backend: Backend) -> None:
    store = backend.store()
    store.create_all()
    with store.engine.begin() as conn:
        conn.execute(text("DROP TABLE fa_notifications"))
        conn.execute(text("UPDATE fa_meta SET value = '7'"))
    store.dispose()
    store = backend.store()
    assert store.condition().version == 7

    assert store.create_all() == 7
    assert store.condition().version == SCHEMA_VERSION == 8
    book = Notifications(store)
    assert book.claim("k", "d", "a", "frozen", AT)
    assert book.status_of("k") == {"d": "claimed"}
