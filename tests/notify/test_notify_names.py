"""How the store names a notification destination (fleet_agent/notify/
destinations.py): by an HMAC of its URL under the worker's notify key, so
whoever reads the store cannot try passwords against it offline; the key
from FLEET_NOTIFY_KEY or a key file made once with mode 0600; the rows of
the unkeyed names written before renamed, so what went out is not sent
again. Deliveries are real (the SDK's ActivityEnvironment, a real store, a
real webhook receiver)."""

from __future__ import annotations

import hashlib
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select
from temporalio.testing import ActivityEnvironment

from activities.notify import NotifyActivities
from fleet_agent.env.env_settings import SettingsError
from fleet_agent.models import NotifyEvent, NotifyRequest
from fleet_agent.notify.destinations import (
    destination_name,
    is_legacy_name,
    legacy_name,
    load_key,
    retired_name,
)
from fleet_agent.notify.rules import idempotency_key
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import Notifications, Store
from fleet_agent.store.tables import table_of
from fleet_agent.store.tables_notify import NotificationRow
from testkit.notify_receivers import WebhookReceiver
from tests.helpers.store_backends import Backend, backend, in_threads

__all__ = ["backend"]  # the fixture, imported for pytest

AT = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
KEY = "k" * 8 + "-test-notify-key-0123456789"
#: What whoever reads the store would try first.
DICTIONARY = ["123456", "password", "qwerty", "hunter2", "letmein", "ops2026"]


def _request(subject: str = "a1-1") -> NotifyRequest:
    event = NotifyEvent(kind="frozen", subject=subject, at=AT, facts={"reason": "r"})
    return NotifyRequest(agent_id="a", key=idempotency_key("a", event, 30), event=event)


def _env(*urls: str, key: str | None = KEY) -> NotifyEnv:
    values = {"FLEET_NOTIFY_URLS": ",".join(urls)}
    if key is not None:
        values["FLEET_NOTIFY_KEY"] = key
    return NotifyEnv.model_validate(values)


def _destinations(store: Store) -> set[str]:
    table = table_of(NotificationRow)
    with store.engine.connect() as conn:
        return {row.destination for row in conn.execute(select(table.c.destination))}


async def test_a_weak_password_cannot_be_tried_against_the_store(store: Store) -> None:
    with WebhookReceiver() as hook:
        url = f"json://ops:hunter2@127.0.0.1:{hook.port}/hook"
        result = await ActivityEnvironment().run(
            NotifyActivities(store, _env(url)).send_notification, _request()
        )
        assert result.sent == 1 and hook.posts
    (name,) = _destinations(store)
    assert name == destination_name(KEY.encode(), url)
    # Everything of the URL but the password is known to whoever reads the
    # store (the host, the user: a config shown, a log line). Unkeyed, the
    # name gave the password away at the fourth guess.
    for guess in DICTIONARY:
        candidate = url.replace("hunter2", guess)
        assert hashlib.sha256(candidate.encode()).hexdigest()[:16] != name, guess
        assert not name.startswith(hashlib.sha256(candidate.encode()).hexdigest()[:8]), guess


async def test_without_a_key_the_worker_makes_one_beside_the_store_and_keeps_it(
    store: Store, tmp_path: Path
) -> None:
    key_file = tmp_path / "notify.key"  # beside the store's file (conftest: tmp_path/fleet.db)
    assert not key_file.exists()
    with WebhookReceiver() as hook:
        env = _env(hook.url("h"), key=None)
        first = await ActivityEnvironment().run(
            NotifyActivities(store, env).send_notification, _request()
        )
        assert first.sent == 1
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = key_file.read_text().strip()
        assert len(key) == 64 and int(key, 16) >= 0
        assert _destinations(store) == {destination_name(key.encode(), hook.url("h"))}
        # The next worker process reads the same key: what went out is known.
        key_file.chmod(0o644)
        again = await ActivityEnvironment().run(
            NotifyActivities(store, env).send_notification, _request()
        )
        assert (again.sent, again.already_sent) == (0, 1) and len(hook.posts) == 1
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600, "tightened"
        assert key_file.read_text().strip() == key


def test_workers_starting_together_make_one_key(tmp_path: Path) -> None:
    path = tmp_path / "var" / "notify.key"
    keys = in_threads(8, lambda i: load_key(None, path))
    assert len({key for key, _ in keys}) == 1 and {src for _, src in keys} == {str(path)}
    assert sorted(p.name for p in path.parent.iterdir()) == ["notify.key"], "no leftovers"


async def test_a_key_in_the_environment_makes_no_file(store: Store, tmp_path: Path) -> None:
    with WebhookReceiver() as hook:
        await ActivityEnvironment().run(
            NotifyActivities(store, _env(hook.url("h"))).send_notification, _request()
        )
    assert not (tmp_path / "notify.key").exists()


def test_a_short_key_is_refused_in_one_line_without_showing_it() -> None:
    with pytest.raises(SettingsError) as refused:
        NotifyEnv.read({"FLEET_NOTIFY_KEY": "s3cret-short"})
    message = str(refused.value)
    assert message.startswith("FLEET_NOTIFY_KEY must be at least 16 characters")
    assert "s3cret" not in message and "\n" not in message


async def test_rows_under_unkeyed_names_are_renamed_so_nothing_goes_out_twice(
    backend: Backend,
) -> None:
    store = backend.store()
    store.create_all()
    book = Notifications(store)
    key = KEY.encode()
    with WebhookReceiver() as hook:
        url, gone = hook.url("h"), "json://gone.example.com/old-SECRET"
        sent, other = _request("a1-1"), _request("a1-2")
        # Written before names were keyed: the request already went to `url`;
        # `gone` is no longer configured.
        for req, dest in ((sent, legacy_name(url)), (sent, legacy_name(gone))):
            assert book.claim(req.key, dest, "a", "frozen", AT)
            book.record(req.key, dest, "", AT)
        # Another worker, keyed already, claimed `other` while this one's old
        # row of it was still there.
        for dest in (legacy_name(url), destination_name(key, url)):
            assert book.claim(other.key, dest, "a", "frozen", AT)

        acts = NotifyActivities(store, _env(url))
        result = await ActivityEnvironment().run(acts.send_notification, sent)
        assert (result.sent, result.already_sent) == (0, 1)
        assert hook.posts == [], "sent again after the upgrade"
        assert book.status_of(sent.key) == {
            destination_name(key, url): "sent",
            retired_name(key, legacy_name(gone)): "sent",
        }
        assert book.status_of(other.key) == {
            destination_name(key, url): "claimed",
            retired_name(key, legacy_name(url)): "claimed",
        }
        assert not any(is_legacy_name(d) for d in _destinations(store))
        # Once: a later delivery renames nothing more and finds its rows.
        assert book.rename_destinations({}, is_legacy_name, lambda old: old) == 0
