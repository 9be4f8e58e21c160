"""A delivery the fleet monitor started and that failed is shown too: `status`
and the console read the failures from the store (`fa_notifications`), where
every delivery is recorded, not only the agent workflow's."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleet_agent.models import AgentStatus, NotifyFailure
from fleet_agent.store import Notifications, Store
from starter.views.notify import stored_failures, with_stored_failures
from starter.views.render import status_text
from tests.helpers import idle_status

AT = datetime(2026, 12, 6, 9, 30, tzinfo=UTC)


def _status(failures: list[NotifyFailure]) -> AgentStatus:
    return idle_status(run_count=4, notify_failures=failures, notify_delivered=2)


def test_the_monitors_failed_delivery_shows_in_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store = Store(url)
    store.create_all()
    book = Notifications(store)
    # What send_notification records for the monitor's "below target" when
    # its destination refused it, and a delivery of another agent.
    assert book.claim("k1", "d1", "a1", "under_target", AT)
    book.record("k1", "d1", "json://hooks.example.com: HTTP 500", AT)
    assert book.claim("k2", "d1", "other", "frozen", AT)
    book.record("k2", "d1", "json://hooks.example.com: HTTP 500", AT)
    store.dispose()
    monkeypatch.setenv("FLEET_DATABASE_URL", url)

    failures = stored_failures("a1")
    assert failures is not None and [f.kind for f in failures] == ["under_target"]
    shown = status_text(with_stored_failures(_status([]), failures), AT)
    assert "1 FAILED" in shown and "under_target" in shown and "HTTP 500" in shown


def test_without_a_readable_store_the_querys_failures_stand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{tmp_path / 'none.db'}")
    assert stored_failures("a1") is None
    own = [NotifyFailure(at=AT, kind="frozen", error="mailto://smtp.example.com: refused")]
    shown = status_text(with_stored_failures(_status(own), None), AT)
    assert "1 FAILED" in shown and "frozen" in shown
