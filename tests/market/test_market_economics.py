"""Slots, revenue, cost, profit and loss from a reading and the points
before it (fleet_agent/market/economics.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fleet_agent.market.economics import MIN_WINDOW, assess
from fleet_agent.market.point import (
    MAX_NFIL,
    ChallengeLedger,
    MarketPoint,
    MarketPolicy,
    MarketReading,
    MarketStepRequest,
    MarketStepResult,
    QueueRow,
)
from fleet_agent.wire import MAX_FLOAT

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _reading(paid: int = 0, **over: Any) -> MarketReading:
    body: dict[str, Any] = {"as_of": NOW, "enabled": True, "price_nfil": 5_000_000}
    return MarketReading.model_validate({**body, "paid_total_nfil": paid, **over})


def _point(ago: timedelta, paid: int = 0, proofs: int = 0, **over: Any) -> MarketPoint:
    ledger = ChallengeLedger(challenges=500, paid_proofs_total=proofs)
    return MarketPoint.model_validate(
        {"at": NOW - ago, "paid_total_nfil": paid, "ledger": ledger, **over}
    )


def _req(**over: Any) -> MarketStepRequest:
    policy = over.pop("policy", MarketPolicy(challenges=500))
    body: dict[str, Any] = {"agent_id": "a", "policy": policy, "gpus": 4}
    return MarketStepRequest.model_validate({**body, **over})


def _assess(
    reading: MarketReading,
    req: MarketStepRequest,
    prev: MarketPoint | None = None,
    base: MarketPoint | None = None,
    proofs: int = 0,
    llm: float = 0.0,
) -> MarketStepResult:
    ledger = ChallengeLedger(based_on=500, challenges=500, paid_proofs_total=proofs)
    return assess(reading, ledger, req, prev, base, llm)


def _p(result: MarketStepResult) -> MarketPoint:
    assert result.point is not None
    return result.point


def test_slots_in_use_are_open_asks_and_open_paid_rows() -> None:
    def row(sid: str, **flags: Any) -> QueueRow:
        return QueueRow(service_id=sid, obtained_at=NOW - timedelta(minutes=3), **flags)

    rows = [
        row("a"),
        row("b", computed=True),
        row("c", was_pow=True),  # a challenge proof holds no slot
        row("d", computed=True, submitted=True),
    ]
    point = _p(_assess(_reading(asks_open=2, rows=rows, queue_count=1), _req()))
    assert (point.slots_total, point.slots_used) == (10, 4)
    assert (point.rows_open, point.pow_open, point.queued) == (3, 1, 1)
    # An open row's kind shows only once submitted: past the slots there
    # are, the open rows are challenge proofs (paid work needs a slot).
    many = [row(f"r{i}") for i in range(12)]
    point = _p(_assess(_reading(asks_open=2, rows=many), _req()))
    assert (point.slots_total, point.slots_used, point.rows_open) == (10, 10, 12)
    ledger = ChallengeLedger(based_on=500, challenges=40)  # the count says 0 slots
    point = _p(assess(_reading(asks_open=2, rows=many), ledger, _req(), None, None))
    assert point.slots_used == 2, "the open asks at least"


def test_revenue_and_paid_proofs_over_the_hour() -> None:
    base = _point(HOUR, paid=1_000_000_000, proofs=100)
    point = _p(_assess(_reading(paid=1_500_000_000), _req(), base=base, proofs=200))
    assert point.revenue_nfil_per_h == pytest.approx(500_000_000)
    assert point.paid_proofs_per_h == pytest.approx(100)
    # A longer gap (the monitor was down): per hour of it.
    base = _point(2 * HOUR, paid=1_000_000_000, proofs=100)
    point = _p(_assess(_reading(paid=1_500_000_000), _req(), base=base, proofs=200))
    assert point.revenue_nfil_per_h == pytest.approx(250_000_000)


def test_a_total_that_fell_is_no_revenue_never_a_negative_one() -> None:
    base = _point(HOUR, paid=9_000_000_000, proofs=900)
    point = _p(_assess(_reading(paid=5_000_000), _req(), base=base, proofs=1))
    assert (point.revenue_nfil_per_h, point.paid_proofs_per_h) == (0, 0)


def test_under_the_minimum_window_the_previous_figures_stand() -> None:
    prev = _point(timedelta(minutes=1), revenue_nfil_per_h=7e8, paid_proofs_per_h=90)
    base = _point(MIN_WINDOW - timedelta(seconds=1), paid=0)
    point = _p(_assess(_reading(paid=10**9), _req(), prev=prev, base=base))
    assert (point.revenue_nfil_per_h, point.paid_proofs_per_h) == (7e8, 90)
    first = _p(_assess(_reading(paid=10**9), _req()))
    assert (first.revenue_nfil_per_h, first.loss_since) == (0, None)


def test_fil_in_dollars_the_operators_figure_wins_over_the_url() -> None:
    base = _point(HOUR, paid=0)
    reading = _reading(paid=2_000_000_000, fil_usd=3.0)
    configured = _req(policy=MarketPolicy(fil_usd=2.0), rental_usd_per_h=1.0)
    point = _p(_assess(reading, configured, base=base, llm=0.5))
    assert (point.fil_usd, point.fil_usd_source) == (2.0, "config")
    assert point.revenue_usd_per_h == pytest.approx(4.0)
    assert point.cost_usd_per_h == pytest.approx(1.5)
    assert point.profit_usd_per_h == pytest.approx(2.5)
    point = _p(_assess(reading, _req(rental_usd_per_h=1.0), base=base))
    assert (point.fil_usd, point.fil_usd_source, point.revenue_usd_per_h) == (3.0, "url", 6.0)
    point = _p(_assess(_reading(paid=2_000_000_000), _req(rental_usd_per_h=1.0), base=base))
    assert (point.fil_usd_source, point.revenue_usd_per_h, point.profit_usd_per_h) == (
        "none",
        None,
        None,
    )
    assert "profit n/a" in point.line()


def test_a_loss_starts_carries_clears_and_alerts_after_loss_minutes() -> None:
    policy = MarketPolicy(fil_usd=2.0, loss_minutes=30, on_loss="lower")
    req = _req(policy=policy, rental_usd_per_h=3.0)
    base = _point(HOUR, paid=0, proofs=0)
    losing = _reading(paid=1_000_000_000)  # $2/h against $3/h
    first = _assess(losing, req, base=base, proofs=100)
    assert _p(first).loss_since == NOW and first.loss_alert == ""
    prev = _p(first).model_copy(update={"loss_since": NOW - timedelta(minutes=31)})
    later = _assess(losing, req, prev=prev, base=base, proofs=100)
    assert _p(later).loss_since == NOW - timedelta(minutes=31), "carried"
    alert = later.loss_alert
    assert alert.startswith("market: proving at a loss since 2026-12-07 11:29 UTC (31 min)")
    assert "$2.00/h against cost $3.00/h, losing $1.00/h" in alert
    assert "market_on_loss=lower" in alert
    paying = _assess(_reading(paid=2_000_000_000), req, prev=prev, base=base, proofs=100)
    assert (_p(paying).loss_since, paying.loss_alert) == (None, "")


def test_no_revenue_while_asking_and_paying_is_a_loss_even_without_a_fil_price() -> None:
    req = _req(rental_usd_per_h=3.0)
    base = _point(HOUR, paid=10**9)
    assert _p(_assess(_reading(paid=10**9), req, base=base)).loss_since == NOW
    stopped = _reading(paid=10**9, enabled=False)
    assert _p(_assess(stopped, req, base=base)).loss_since is None, "not asking: no market loss"
    free = _reading(paid=10**9)
    assert _p(_assess(free, _req(), base=base)).loss_since is None, "nothing costs"
    # With revenue but no FIL price, a loss cannot be told.
    assert _p(_assess(_reading(paid=2 * 10**9), req, base=base)).loss_since is None


def test_the_note_plans_the_challenge_proofs_slots_lack() -> None:
    req = _req(gpus=8, capacity_per_h=200.0, rental_usd_per_h=8.0)
    reading = _reading()
    ledger = ChallengeLedger(based_on=230, challenges=230)
    point = _p(assess(reading, ledger, req, None, None))
    assert point.note == (
        "8 GPUs, 4 slots: 4 more slot(s) need 170 challenge proofs (earned while asks find "
        "no free slot), about 6.8 GPU-hours ≈ $6.80 at the fleet's $1.00/GPU-h"
    )
    enough = _p(assess(reading, ChallengeLedger(challenges=400), req, None, None))
    assert enough.note == ""
    unmeasured = _p(assess(reading, ledger, _req(gpus=8), None, None))
    assert unmeasured.note.endswith("(earned while asks find no free slot)")


def test_absurd_figures_are_bounded_not_refused() -> None:
    base = _point(MIN_WINDOW, paid=0)
    req = _req(policy=MarketPolicy(fil_usd=100_000), rental_usd_per_h=10**6)
    point = _p(_assess(_reading(paid=MAX_NFIL), req, base=base, llm=10**9))
    assert point.revenue_nfil_per_h == MAX_FLOAT, "a Wire float's bound"
    assert point.revenue_usd_per_h == 1e9 and point.llm_usd_per_h == 1e6
    MarketPoint.model_validate_json(point.model_dump_json())
