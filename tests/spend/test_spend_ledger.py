"""The spend ledger in the store, on SQLite and PostgreSQL: accrual per hour,
gap fill from `start_date`, stopped machines at the storage rate, traffic,
close at a known end or when last seen, the summaries, and the
compare-and-set that keeps two accruals at once from counting time twice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Row

from fleet_agent.fleet.billing import KB_PER_GB, billed_dph, hour_slices
from fleet_agent.store import SpendLedger, Store
from fleet_agent.vast.models import Instance
from tests.helpers import finish_ok
from tests.helpers.store_backends import in_threads, store_on_both_backends

__all__ = ["store_on_both_backends"]

AGENT = "ledger-test"
T0 = datetime(2026, 3, 31, 22, 30, tzinfo=UTC)


def _inst(iid: int, *, start: datetime = T0, dph: float = 1.0, **fields: Any) -> Instance:
    values: dict[str, Any] = {
        "id": iid,
        "actual_status": "running",
        "intended_status": "running",
        "cur_state": "running",
        "dph_total": dph,
        "storage_total_cost": 0.04,
        "start_date": start.timestamp(),
        **fields,
    }
    return Instance.model_validate(values)


def _usd(ledger: SpendLedger) -> dict[int, float]:
    return {i.instance_id: i.usd for i in ledger.instances(AGENT)}


def test_hour_slices_split_at_clock_hours() -> None:
    start = T0.timestamp()
    assert hour_slices(start, start + 5400) == [(start - 1800, 1800.0), (start + 1800, 3600.0)]
    assert hour_slices(start, start) == []


def test_billed_rates_by_state() -> None:
    assert billed_dph(_inst(1)) == 1.0
    assert billed_dph(_inst(1, actual_status="stopped", intended_status="stopped")) == 0.04
    assert billed_dph(_inst(1, actual_status="frozen")) == 1.0, "frozen keeps its GPU"
    assert billed_dph(_inst(1, actual_status="exited")) == 1.0, "dead until destroyed"
    assert billed_dph(_inst(1, cur_state="unloaded")) == 0.0
    no_price = _inst(1, actual_status="stopped", storage_total_cost=None)
    assert billed_dph(no_price) == 1.0, "unknown storage price: overcount"


def test_a_machine_first_seen_late_is_billed_from_its_start(store: Store) -> None:
    ledger = SpendLedger(store)
    now = T0 + timedelta(hours=2, minutes=45)  # 2026-04-01 01:15
    ledger.accrue(AGENT, [_inst(7)], now)
    assert _usd(ledger) == {7: pytest.approx(2.75)}
    s = ledger.summary(AGENT, now)
    assert s.today_usd == pytest.approx(1.25) and s.month_usd == pytest.approx(1.25)
    assert s.last_24h_usd == pytest.approx(2.75)
    assert s.current_dph == 1.0 and s.open_instances == 1 and s.accrued_until == now
    # A day later, the window's oldest hour counts pro rata (uniformly over the hour).
    later = datetime(2026, 4, 1, 22, 45, tzinfo=UTC)
    ledger.accrue(AGENT, [_inst(7)], later)
    s = ledger.summary(AGENT, later)
    assert s.today_usd == pytest.approx(22.75)
    assert s.last_24h_usd == pytest.approx(0.5 * 0.25 + 1.0 + 22.75)
    assert s.month_usd == pytest.approx(22.75)
    assert ledger.summary(AGENT, datetime(2026, 5, 2, tzinfo=UTC)).month_usd == 0.0


def test_a_row_without_a_price_keeps_the_machines_last_rate(store: Store) -> None:
    # Prices fail closed (issue 42): a listing whose row lost its price, or
    # gives a negative or NaN one, is never billed as $0.
    ledger = SpendLedger(store)
    ledger.accrue(AGENT, [_inst(7, dph=2.0)], T0)
    for k, odd in enumerate((None, -1.0, float("nan")), start=1):
        ledger.accrue(AGENT, [_inst(7, dph=odd)], T0 + timedelta(hours=k))  # type: ignore[arg-type]
    assert _usd(ledger) == {7: pytest.approx(6.0)}
    assert ledger.summary(AGENT, T0 + timedelta(hours=3)).current_dph == 2.0


def test_stopped_machines_bill_storage_and_traffic_is_billed_per_gb(store: Store) -> None:
    ledger = SpendLedger(store)
    kb = 10 * KB_PER_GB
    ledger.accrue(AGENT, [_inst(1, inet_down_cost=0.02, inet_down_billed=kb)], T0)
    assert _usd(ledger)[1] == pytest.approx(0.2), "10 GB at $0.02 since its start"
    stopped = _inst(
        1,
        actual_status="stopped",
        intended_status="stopped",
        inet_down_cost=0.02,
        inet_down_billed=kb * 1.5,
    )
    ledger.accrue(AGENT, [stopped], T0 + timedelta(hours=2))
    assert _usd(ledger)[1] == pytest.approx(0.2 + 2 * 0.04 + 0.1)
    assert ledger.summary(AGENT, T0 + timedelta(hours=2)).current_dph == 0.04
    # A counter that starts again counts whole.
    again = _inst(1, inet_down_cost=0.02, inet_down_billed=kb * 0.5)
    ledger.accrue(AGENT, [again], T0 + timedelta(hours=2))
    assert _usd(ledger)[1] == pytest.approx(0.2 + 0.08 + 0.1 + 0.1)


def test_vanished_machines_close_when_last_seen_and_reopen_if_listed_again(store: Store) -> None:
    ledger = SpendLedger(store)
    ledger.accrue(AGENT, [_inst(1), _inst(2, dph=0.5)], T0 + timedelta(hours=1))
    ledger.accrue(AGENT, [_inst(1)], T0 + timedelta(hours=3))
    lines = {i.instance_id: i for i in ledger.instances(AGENT)}
    assert lines[2].closed_by == "vanished" and lines[2].ended_at == T0 + timedelta(hours=1)
    assert lines[2].usd == pytest.approx(0.5)
    assert ledger.summary(AGENT, T0 + timedelta(hours=3)).current_dph == 1.0
    # Listed again (a listing glitch): open again, the unseen time billed.
    ledger.accrue(AGENT, [_inst(1), _inst(2, dph=0.5)], T0 + timedelta(hours=4))
    lines = {i.instance_id: i for i in ledger.instances(AGENT)}
    assert lines[2].ended_at is None and lines[2].usd == pytest.approx(2.0)


def test_close_at_a_known_end(store: Store) -> None:
    ledger = SpendLedger(store)
    ledger.accrue(AGENT, [_inst(1)], T0 + timedelta(hours=1))
    ledger.close(AGENT, 1, T0 + timedelta(hours=1, minutes=30))
    # Never seen before: billed from its start, up to the destroy.
    ledger.close(AGENT, 2, T0 + timedelta(hours=2), _inst(2, dph=0.5))
    ledger.close(AGENT, 1, T0 + timedelta(hours=9))  # already ended: no change
    # A listing from before the destroys says nothing new about them.
    ledger.accrue(AGENT, [_inst(1), _inst(2, dph=0.5)], T0 + timedelta(hours=5))
    lines = {i.instance_id: i for i in ledger.instances(AGENT)}
    assert lines[1].usd == pytest.approx(1.5) and lines[1].closed_by == "destroyed"
    assert lines[2].usd == pytest.approx(1.0) and lines[2].ended_at == T0 + timedelta(hours=2)
    assert ledger.summary(AGENT, T0 + timedelta(hours=5)).current_dph == 0.0


def test_dph_at_a_past_moment(store: Store) -> None:
    ledger = SpendLedger(store)
    later = _inst(2, start=T0 + timedelta(hours=1), dph=0.25)
    ledger.accrue(AGENT, [_inst(1), later], T0 + timedelta(hours=2))
    ledger.close(AGENT, 1, T0 + timedelta(hours=3))
    assert ledger.dph_at(AGENT, T0 - timedelta(minutes=1)) == 0.0
    assert ledger.dph_at(AGENT, T0 + timedelta(minutes=30)) == 1.0
    assert ledger.dph_at(AGENT, T0 + timedelta(hours=2)) == 1.25
    assert ledger.dph_at(AGENT, T0 + timedelta(hours=3)) == 0.25
    assert ledger.dph_at("another-agent", T0 + timedelta(hours=2)) == 0.0


def test_a_lost_compare_and_set_reads_again_and_counts_once(store: Store) -> None:
    """Deterministic: another accrual commits between our read and our write."""
    first, second = SpendLedger(store), SpendLedger(store)
    ledger_rows = SpendLedger._rows
    now = T0 + timedelta(hours=2)
    fleet = [_inst(1), _inst(2, dph=0.5)]
    first.accrue(AGENT, fleet, T0 + timedelta(hours=1))
    interfered: list[bool] = []

    def rows_then_interfere(
        self: SpendLedger, conn: Connection, agent_id: str, ids: Any, **kw: Any
    ) -> dict[int, Row[Any]]:
        found = ledger_rows(self, conn, agent_id, ids, **kw)
        if self is first and not interfered:
            interfered.append(True)
            second.accrue(AGENT, fleet, now)  # commits on its own connection
        return found

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SpendLedger, "_rows", rows_then_interfere)
        first.accrue(AGENT, fleet, now)
    assert interfered
    assert _usd(first) == {1: pytest.approx(2.0), 2: pytest.approx(1.0)}
    hours = first.summary(AGENT, now)
    assert hours.last_24h_usd == pytest.approx(3.0)


def test_two_threads_accruing_at_once_never_double_count(store: Store) -> None:
    fleet = [_inst(i, dph=0.1 * i) for i in range(1, 6)]
    steps = [T0 + timedelta(minutes=5 * k) for k in range(1, 25)]

    def accrue_all(_: int) -> None:
        ledger = SpendLedger(store)
        for at in steps:
            ledger.accrue(AGENT, fleet, at)

    in_threads(2, accrue_all)
    ledger = SpendLedger(store)
    hours = (steps[-1] - T0).total_seconds() / 3600
    expected = {i.id: (i.dph_total or 0.0) * hours for i in fleet}
    assert _usd(ledger) == pytest.approx(expected)
    assert ledger.summary(AGENT, steps[-1]).last_24h_usd == pytest.approx(sum(expected.values()))


def test_each_attempt_of_a_run_records_the_dph_it_changed(store: Store) -> None:
    def run_once(workflow_run_id: str, added: float, removed: float) -> None:
        store.run_writes.begin_run(AGENT, 3, 1, [], "", T0, workflow_run_id)
        finish_ok(
            store,
            AGENT,
            3,
            T0 + timedelta(minutes=1),
            final_text="done",
            mutating_calls=2,
            tool_calls=2,
            llm_seconds=0.1,
            workflow_run_id=workflow_run_id,
            dph_added=added,
            dph_removed=removed,
        )

    run_once("wf-1", 0.5, 0.25)
    run_once("wf-1", 0.5, 0.25)  # a retried record_run: the same figures
    run_once("wf-2", 0.0, 0.0)  # replayed after a reset
    first, second = store.run_reads.run_attempts(AGENT, 3)
    assert (first.dph_added, first.dph_removed) == (0.5, 0.25)
    assert (second.dph_added, second.dph_removed) == (0.0, 0.0)
    assert store.run_reads.get_run(AGENT, 3, attempt=1) == first
    assert [(r.attempt, r.dph_added) for r in store.run_reads.list_runs(AGENT)] == [
        (2, 0.0),
        (1, 0.5),
    ]
