"""The Snark Market service's rules, one by one (simulator/snark_market/service.py,
price.py): slots from challenge proofs, challenge proofs when slots are short,
assignment to the lowest eligible ask, the 45-minute penalty and the
reassignment at the old price, the withdrawal's cost, vouchers and their
redemption, expiry, and the price rule."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simulator.curio.address import key_address
from simulator.curio.fil import ATTO_PER_NFIL
from simulator.demand import DemandConfig
from simulator.snark_market import DEADLINE_S, MarketConfig, ProviderSpec, SnarkMarket
from simulator.snark_market.clients import minute_arrivals
from simulator.snark_market.events import Scheduler
from simulator.snark_market.price import next_price
from simulator.snark_market.service import MarketService, ServiceError

T0 = 1_800_000_000.0
A, B = key_address("provider-a"), key_address("provider-b")
PRICE = 5_000_000  # nFIL per P: 0.005 FIL


def _service(price: int = PRICE, expire_s: float = 7200.0) -> tuple[Scheduler, MarketService]:
    sched = Scheduler(T0)
    return sched, MarketService(sched, 1, price_nfil=price, expire_s=expire_s)


def _atto(nfil: int) -> int:
    return nfil * ATTO_PER_NFIL


def test_slots_are_completed_challenges_over_50_and_each_ask_holds_one() -> None:
    _, svc = _service()
    acc = svc.account(A, challenges=149)
    assert acc.slots == 2
    svc.create_ask(A, _atto(PRICE))
    svc.create_ask(A, _atto(PRICE))
    assert (len(acc.asks), acc.free) == (2, 0)
    # A third ask without a free slot is a challenge proof, not an ask.
    svc.create_ask(A, _atto(PRICE))
    assert len(acc.asks) == 2
    [challenge] = svc.poll_work(A).requests
    assert challenge.challenge and challenge.price_nfil == 0


def test_an_assigned_paid_proof_holds_a_slot_and_returning_it_frees_it() -> None:
    _, svc = _service()
    acc = svc.account(A, challenges=50)
    svc.create_ask(A, _atto(PRICE))
    req = svc.client_request("porep")
    assert req.provider == A and acc.used == 1 and acc.free == 0
    svc.respond_work(A, req.cid)
    assert acc.used == 0 and acc.free == 1


def test_a_challenge_proof_earns_one_and_a_slot_at_50_without_a_voucher() -> None:
    _, svc = _service()
    acc = svc.account(A, challenges=49)
    assert acc.slots == 0
    svc.create_ask(A, _atto(PRICE))
    [challenge] = svc.poll_work(A).requests
    reward = svc.respond_work(A, challenge.cid)
    assert reward is not None and reward.pow
    assert (reward.nonce, reward.cumulative_atto) == (0, 0)
    assert (acc.challenges, acc.slots, acc.nonce) == (50, 1, 0)
    # Now the ask is a real one.
    svc.create_ask(A, _atto(PRICE))
    assert len(acc.asks) == 1 and not svc.poll_work(A).requests


def test_a_request_goes_to_the_lowest_price_ask_at_or_under_its_price() -> None:
    _, svc = _service()
    svc.account(A, 500)
    svc.account(B, 500)
    svc.create_ask(B, _atto(PRICE - 1000))
    svc.create_ask(A, _atto(PRICE - 2000))
    svc.create_ask(A, _atto(PRICE + 1))  # over the request's price: never taken
    first, second, third = (svc.client_request("porep") for _ in range(3))
    assert (first.provider, second.provider) == (A, B)
    assert third.state == "waiting" and third.provider is None


def test_an_ask_that_opens_takes_the_oldest_waiting_request_it_may_take() -> None:
    _, svc = _service()
    svc.account(A, 500)
    old = svc.client_request("porep")
    svc.price_nfil = PRICE // 2
    cheap = svc.client_request("porep")
    # An ask above the cheap request's price skips it for the older one.
    svc.create_ask(A, _atto(PRICE))
    assert old.provider == A and cheap.state == "waiting"
    svc.create_ask(A, _atto(PRICE // 2))
    assert cheap.provider == A


def test_a_proof_late_by_45_minutes_costs_50_and_goes_to_another_provider() -> None:
    sched, svc = _service()
    a, b = svc.account(A, 100), svc.account(B, 100)
    svc.create_ask(A, _atto(PRICE - 1000))
    svc.create_ask(B, _atto(PRICE))
    req = svc.client_request("porep")
    assert req.provider == A
    assert DEADLINE_S == 45 * 60  # the doc's "within 45 minutes"
    sched.run_until(T0 + 45 * 60 - 1)
    assert (req.provider, a.challenges, a.penalties) == (A, 100, 0)
    sched.run_until(T0 + 45 * 60)
    assert (a.challenges, a.penalties, a.slots) == (50, 1, 1)
    assert req.provider == B and req.attempts == 2 and A in req.failed_by
    # The late answer is gone (HTTP 410); the new provider's is paid.
    assert svc.respond_work(A, req.cid) is None
    assert a.gone == 1 and a.nonce == 0
    reward = svc.respond_work(B, req.cid)
    assert reward is not None and reward.amount_atto == _atto(PRICE)
    assert b.penalties == 0


def test_the_penalty_never_takes_the_balance_below_zero() -> None:
    sched, svc = _service()
    a = svc.account(A, 60)
    svc.create_ask(A, _atto(PRICE))
    svc.client_request("porep")
    a.challenges = 20  # as after withdrawals and earlier penalties
    sched.run_until(T0 + DEADLINE_S)
    assert a.challenges == 0 and a.penalties == 1


def test_a_retried_proof_pays_the_price_it_was_first_assigned_at() -> None:
    sched, svc = _service()
    svc.account(A, 100)
    svc.account(B, 100)
    svc.create_ask(A, _atto(1_000_000))
    req = svc.client_request("snap")
    svc.price_nfil = 9_000_000  # the market moved on
    svc.create_ask(B, _atto(2_000_000))
    newer = svc.client_request("porep")
    assert newer.provider == B and newer.price_nfil == 9_000_000
    svc.respond_work(B, newer.cid)
    svc.create_ask(B, _atto(2_000_000))
    sched.run_until(T0 + DEADLINE_S)
    assert req.provider == B and req.attempts == 2
    reward = svc.respond_work(B, req.cid)
    # Snap is 1.6 P at the old 0.005 FIL/P, not at 0.009.
    assert reward is not None and reward.amount_atto == _atto(PRICE * 16 // 10)


def test_a_late_challenge_proof_is_gone_and_costs_nothing() -> None:
    sched, svc = _service()
    a = svc.account(A, 10)
    svc.create_ask(A, _atto(PRICE))
    [challenge] = svc.poll_work(A).requests
    sched.run_until(T0 + DEADLINE_S)
    assert svc.respond_work(A, challenge.cid) is None
    assert (a.challenges, a.penalties, a.challenges_done) == (10, 0, 0)


def test_withdrawing_an_ask_costs_one_challenge_proof() -> None:
    _, svc = _service()
    a = svc.account(A, 100)
    ask = svc.create_ask(A, _atto(PRICE))
    svc.withdraw_ask(A, ask)
    assert (a.challenges, a.withdrawals, len(a.asks), a.slots) == (99, 1, 0, 1)
    with pytest.raises(ServiceError) as refused:
        svc.withdraw_ask(A, ask)
    assert str(refused.value) == "404 Not Found - ask not found"
    assert a.challenges == 99


def test_an_ask_price_must_be_whole_nfil_and_at_most_one_fil() -> None:
    _, svc = _service()
    svc.account(A, 100)
    for price in (_atto(PRICE) + 1, _atto(10**9 + 1)):
        with pytest.raises(ServiceError) as refused:
            svc.create_ask(A, price)
        assert refused.value.status == 400
    assert svc.create_ask(A, _atto(10**9)) > 0


def test_vouchers_are_cumulative_per_provider_and_redeemed_in_order() -> None:
    _, svc = _service()
    a = svc.account(A, 500)
    paid = []
    for kind in ("porep", "snap", "porep"):
        svc.create_ask(A, _atto(PRICE))
        req = svc.client_request(kind)
        reward = svc.respond_work(A, req.cid)
        assert reward is not None
        paid.append((reward.nonce, reward.amount_atto, reward.cumulative_atto))
    porep, snap = _atto(PRICE), _atto(PRICE * 16 // 10)
    assert paid == [(1, porep, porep), (2, snap, porep + snap), (3, porep, 2 * porep + snap)]
    svc.redeem(a.provider_id, porep + snap, 2)
    assert svc.provider_state(a.provider_id) == (porep + snap, 2)
    with pytest.raises(ValueError, match="already redeemed"):
        svc.redeem(a.provider_id, porep, 1)
    with pytest.raises(ValueError, match="no such voucher"):
        svc.redeem(a.provider_id, 10 * porep, 4)


def test_a_request_no_ask_takes_expires_but_retried_work_does_not() -> None:
    sched, svc = _service(expire_s=600.0)
    svc.account(A, 100)
    svc.create_ask(A, _atto(PRICE))
    retried = svc.client_request("porep")
    lonely = svc.client_request("porep")
    sched.run_until(T0 + 600)
    assert lonely.state == "expired" and svc.counts["expired"] == 1
    sched.run_until(T0 + DEADLINE_S)  # A misses it; no one else asks
    assert retried.state == "waiting"
    sched.run_until(T0 + DEADLINE_S + 7200)
    assert retried.state == "waiting"


def test_clients_ask_for_porep_and_snap_in_the_configured_mix() -> None:
    cfg = MarketConfig(demand=DemandConfig(curve=((0.0, 600.0),)), snap_share=0.3)
    minute0 = int(T0 // 60)
    arrivals = [a for m in range(minute0, minute0 + 200) for a in minute_arrivals(cfg, 1, m)]
    snaps = sum(a.kind == "snap" for a in arrivals) / len(arrivals)
    assert len(arrivals) > 1500 and 0.26 < snaps < 0.34
    only_porep = replace(cfg, snap_share=0.0)
    assert {a.kind for a in minute_arrivals(only_porep, 1, minute0)} == {"porep"}
    # Each client's most per P spreads around the median.
    limits = sorted(a.max_price_nfil for a in arrivals)
    assert limits[len(limits) // 2] == pytest.approx(cfg.client_max_price_nfil, rel=0.05)


def test_the_market_seed_draws_the_clients_even_when_the_demand_has_its_own() -> None:
    cfg = MarketConfig(demand=DemandConfig(curve=((0.0, 600.0),), seed=5))
    minute0 = int(T0 // 60)
    one, other = (
        [a for m in range(minute0, minute0 + 30) for a in minute_arrivals(cfg, seed, m)]
        for seed in (1, 2)
    )
    # The demand's own seed fixes the times; the market's draws kinds and limits.
    assert [a.at for a in one] == [a.at for a in other]
    assert [(a.kind, a.max_price_nfil) for a in one] != [(a.kind, a.max_price_nfil) for a in other]


@pytest.mark.parametrize(
    ("need", "asks", "expected"),
    [
        (0, [4_000_000, 6_000_000], 4_500_000),  # no demand: toward the cheapest ask
        (2, [4_000_000, 6_000_000, 8_000_000], 5_500_000),  # the 2nd cheapest clears it
        (3, [4_000_000, 6_000_000], 5_250_000),  # a shortage: up 10 %, half way
        (0, [], 5_000_000),  # nothing to go by: it stays
    ],
)
def test_the_price_moves_half_way_to_the_clearing_price(
    need: int, asks: list[int], expected: int
) -> None:
    assert next_price(5_000_000, need, asks, smoothing=0.5, shortage_step=0.1) == expected


def test_the_price_stays_within_one_nfil_and_one_fil() -> None:
    assert next_price(10**9, 5, [], smoothing=1.0, shortage_step=0.1) == 10**9
    assert next_price(2, 0, [0], smoothing=1.0, shortage_step=0.1) == 1


def _mean_price(rate: float, gpus: int, hours: float = 2.0) -> float:
    providers = tuple(
        ProviderSpec(f"p{i}", gpus, price, challenges=50 * (gpus + 2))
        for i, price in enumerate((3_000_000, 4_000_000, 5_000_000, 6_000_000, 8_000_000))
    )
    cfg = MarketConfig(demand=DemandConfig(curve=((0.0, rate),)), providers=providers)
    clock = [T0]
    market = SnarkMarket(cfg, clock=lambda: clock[0], seed=3)
    prices: list[int] = []
    for _ in range(int(hours * 60)):
        clock[0] += 60
        prices.append(market.report()["price_nfil"])
    return sum(prices[30:]) / len(prices[30:])


def test_the_price_rises_with_demand_and_falls_with_supply() -> None:
    quiet, busy = _mean_price(60, gpus=4), _mean_price(600, gpus=4)
    plenty = _mean_price(600, gpus=12)
    assert busy > 1.1 * quiet
    assert plenty < 0.9 * busy
