"""The memory of failed hosts, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_agent.store import FailedHosts, Store
from tests.store_backends import store_on_both_backends  # noqa: F401  (a fixture)

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_a_host_is_remembered_until_its_time_is_up(store: Store) -> None:
    hosts = FailedHosts(store)
    hosts.remember("a", machine_id=7, host_id=70, reason="exited", at=T0, until=T0 + HOUR)
    hosts.remember(
        "a", machine_id=8, host_id=None, reason="stuck", at=T0 + 60 * HOUR / 60, until=T0 + 2 * HOUR
    )
    assert [h.machine_id for h in hosts.active("a", T0 + HOUR / 2)] == [8, 7]
    assert [h.machine_id for h in hosts.active("a", T0 + HOUR)] == [8]
    assert hosts.active("a", T0 + 2 * HOUR) == []
    assert hosts.active("b", T0) == [], "another agent's failures are its own"


def test_a_second_failure_extends_the_entry(store: Store) -> None:
    hosts = FailedHosts(store)
    hosts.remember("a", machine_id=7, host_id=70, reason="exited", at=T0, until=T0 + HOUR)
    later = T0 + 3 * HOUR
    hosts.remember(
        "a", machine_id=7, host_id=70, reason="not proving", at=later, until=later + HOUR
    )
    [entry] = hosts.active("a", later)
    assert entry.reason == "not proving" and entry.until == later + HOUR


def test_expired_entries_are_forgotten_and_the_agent_deleted(store: Store) -> None:
    hosts = FailedHosts(store)
    hosts.remember("a", machine_id=1, host_id=None, reason="x", at=T0, until=T0 + HOUR)
    hosts.remember("a", machine_id=2, host_id=None, reason="y", at=T0, until=T0 + 5 * HOUR)
    assert hosts.forget_expired(T0 + 2 * HOUR) == 1
    assert [h.machine_id for h in hosts.active("a", T0)] == [2]
    store.delete_agent("a")
    assert hosts.active("a", T0) == []
