"""The challenge ledger (fleet_agent/market/ledger.py): counted from the
node's queue, each row once, re-based by the operator; and against the
simulated market's own account of the node's wallet."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fleet_agent.market.ledger import advance, withdrew
from fleet_agent.market.parse import market_reading
from fleet_agent.market.point import (
    MAX_IDS,
    ChallengeLedger,
    MarketPolicy,
    MarketReading,
    QueueRow,
)
from simulator.curio.address import key_address
from simulator.curio.proofshare_rpc import ProofshareRpc
from simulator.snark_market import MarketConfig, SnarkMarket

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
POLICY = MarketPolicy(challenges=500)


def _row(sid: str, minutes_ago: float, **flags: Any) -> QueueRow:
    return QueueRow(service_id=sid, obtained_at=NOW - timedelta(minutes=minutes_ago), **flags)


def _reading(*rows: QueueRow, at: datetime = NOW) -> MarketReading:
    return MarketReading(as_of=at, enabled=True, price_nfil=5_000_000, rows=list(rows))


def _done(sid: str, minutes_ago: float = 5, *, pow_: bool = False) -> QueueRow:
    return _row(sid, minutes_ago, computed=True, submitted=True, was_pow=pow_)


def test_the_first_reading_starts_at_the_operators_balance() -> None:
    ledger = advance(None, _reading(), POLICY)
    assert (ledger.based_on, ledger.challenges, ledger.slots) == (500, 500, 10)


def test_a_challenge_proof_done_counts_once_however_often_it_is_seen() -> None:
    ledger = advance(None, _reading(_done("a", pow_=True)), POLICY)
    for _ in range(3):
        ledger = advance(ledger, _reading(_done("a", pow_=True), _done("b", pow_=True)), POLICY)
    assert (ledger.challenges, ledger.pow_done_total) == (502, 2)


def test_a_challenge_proof_not_yet_submitted_or_computed_earns_nothing() -> None:
    rows = (
        _row("a", 2, was_pow=True),
        _row("b", 2, was_pow=True, computed=True),
        _row("c", 2, was_pow=True, submitted=True),  # submitted without a proof: not done
    )
    ledger = advance(None, _reading(*rows), POLICY)
    assert (ledger.challenges, ledger.pow_done_total) == (500, 0)


def test_paid_proofs_are_counted_once_and_leave_the_balance_alone() -> None:
    ledger = advance(None, _reading(_done("a"), _done("b")), POLICY)
    ledger = advance(ledger, _reading(_done("a"), _done("b"), _done("c")), POLICY)
    assert (ledger.paid_proofs_total, ledger.challenges) == (3, 500)


def test_a_row_open_past_its_deadline_costs_fifty_once_and_not_below_zero() -> None:
    ledger = advance(None, _reading(_row("a", 44.9)), POLICY)
    assert ledger.challenges == 500, "not late yet"
    late = _reading(_row("a", 45.1), _row("b", 60, computed=True))
    ledger = advance(ledger, late, POLICY)
    ledger = advance(ledger, late, POLICY)
    assert (ledger.challenges, ledger.penalties_total) == (400, 2)
    # A late challenge proof is charged too (the doc: "assigned work").
    ledger = advance(ledger, _reading(_row("c", 46, was_pow=True)), MarketPolicy(challenges=500))
    assert ledger.challenges == 350
    poor = advance(None, _reading(_row("d", 50)), MarketPolicy(challenges=20))
    assert poor.challenges == 0


def test_the_operator_rebases_and_rows_counted_stay_counted() -> None:
    ledger = advance(None, _reading(_done("a", pow_=True), _row("b", 50)), POLICY)
    assert ledger.challenges == 451
    rebased = advance(
        ledger, _reading(_done("a", pow_=True), _row("b", 55)), MarketPolicy(challenges=700)
    )
    assert (rebased.based_on, rebased.challenges) == (700, 700)
    assert (rebased.pow_done_total, rebased.penalties_total) == (1, 1), "totals kept"
    again = advance(rebased, _reading(_done("c", pow_=True)), MarketPolicy(challenges=700))
    assert again.challenges == 701, "the same setting does not re-base again"


def test_withdrawals_spend_one_each_and_are_totalled() -> None:
    ledger = withdrew(advance(None, _reading(), MarketPolicy(challenges=2)), 3)
    assert (ledger.challenges, ledger.withdrawals_total) == (0, 3)
    assert withdrew(ledger, 0) == ledger


def test_the_ids_kept_are_the_newest_and_bounded() -> None:
    ledger: ChallengeLedger | None = None
    for batch in range(40):
        rows = [
            _done(f"r{batch:02d}x{i:02d}", minutes_ago=1000 - batch * 15 - i, pow_=True)
            for i in range(15)
        ]
        ledger = advance(ledger, _reading(*rows), POLICY)
    assert ledger is not None
    assert ledger.pow_done_total == 600 and ledger.challenges == 1100
    assert len(ledger.pow_ids) == MAX_IDS and ledger.pow_ids[-1] == "r39x14"
    # The newest rows seen again count nothing.
    assert advance(ledger, _reading(*[_done("r39x14", pow_=True)]), POLICY) == ledger


# ---------------------------------------------------------------- against the simulated market


def _node_reading(rpc: ProofshareRpc, now: datetime) -> MarketReading:
    def env(result: Any) -> dict[str, Any]:
        return {"id": 1, "jsonrpc": "2.0", "result": result}

    reading = market_reading(
        env(rpc.get_meta()),
        env(rpc.list_asks()),
        env(rpc.list_queue()),
        env(rpc.payments_summary()),
        rpc.metrics().splitlines(),
        None,
        None,
        now,
    )
    assert isinstance(reading, MarketReading), reading
    return reading


def _market(challenges: int, gpus: int = 4) -> tuple[SnarkMarket, list[float], str]:
    clock = [datetime(2026, 12, 7, 6, 0, tzinfo=UTC).timestamp()]
    market = SnarkMarket(
        MarketConfig(node_challenges=challenges, node_gpus=gpus), clock=lambda: clock[0], seed=5
    )
    wallet = key_address("ledger-test")
    market.set_meta(True, wallet, 5_000_000 * 10**9)
    return market, clock, wallet


def _account(market: SnarkMarket) -> dict[str, Any]:
    account = market.report()["node"]["account"]
    assert account is not None
    return dict(account)


def _polled(
    challenges: int, every_s: int, hours: float = 3
) -> tuple[ChallengeLedger, dict[str, Any]]:
    market, clock, _ = _market(challenges)
    rpc, policy = ProofshareRpc(market), MarketPolicy(challenges=challenges)
    ledger = None
    for _ in range(int(hours * 3600 / every_s)):
        clock[0] += every_s
        ledger = advance(ledger, _node_reading(rpc, datetime.fromtimestamp(clock[0], UTC)), policy)
    assert ledger is not None
    return ledger, _account(market)


def test_polled_often_enough_the_ledger_is_the_markets_own_account() -> None:
    # Two slots for four GPUs: the node earns challenges all along.
    ledger, account = _polled(challenges=100, every_s=30)
    assert account["challenges_done"] > 50 and account["paid_proofs"] > 10
    assert ledger.challenges == account["challenges"]
    assert ledger.pow_done_total == account["challenges_done"]
    assert ledger.paid_proofs_total == account["paid_proofs"]
    assert ledger.penalties_total == account["penalties"] == 0


def test_polled_too_seldom_the_ledger_misses_rows_the_15_newest_never_showed() -> None:
    # A burst of asks without free slots brings many challenge proofs at
    # once: a paid row can leave the 15 newest before a reading sees it
    # submitted (the module's documented limit). The count errs low.
    ledger, account = _polled(challenges=100, every_s=60)
    assert ledger.paid_proofs_total < account["paid_proofs"]
    assert ledger.paid_proofs_total >= 0.9 * account["paid_proofs"]
    assert ledger.challenges <= account["challenges"]


def test_late_work_is_charged_and_the_count_errs_low_never_high() -> None:
    market, clock, _ = _market(challenges=500)
    rpc, policy = ProofshareRpc(market), MarketPolicy(challenges=500)
    ledger = None
    for minute in range(120):
        if minute == 30:
            market.set_gpus(0)  # the machines are gone; the node's asks stay
        clock[0] += 60
        ledger = advance(ledger, _node_reading(rpc, datetime.fromtimestamp(clock[0], UTC)), policy)
    account = _account(market)
    assert ledger is not None and account["penalties"] > 0
    assert ledger.penalties_total >= account["penalties"]
    assert ledger.challenges <= account["challenges"]
