"""The operator's Curio node in the simulated market (simulator/snark_market/node.py,
world.py, prover.py): the Adder's water marks and one request task, task ids
before machines, the 45-minute penalty on a node that cannot keep up and the
410 that follows, challenge proofs earning slots, the hold rule, a service
error's retry, settlement, and a seed's history: the same whatever the
clock's steps, another for another seed."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from simulator.curio.address import key_address
from simulator.curio.fil import ATTO_PER_NFIL
from simulator.demand import DemandConfig
from simulator.snark_market import (
    DEADLINE_S,
    AsyncProver,
    MarketConfig,
    ProofJob,
    Prover,
    ProviderSpec,
    SimulatedProver,
    SnarkMarket,
)

T0 = 1_800_000_000.0
WALLET = key_address("operator")
PRICE_ATTO = 4_000_000 * ATTO_PER_NFIL  # 0.004 FIL/P


class Clock:
    """The simulator's clock as the market sees it: moved by the test."""

    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def _market(
    clock: Clock,
    *,
    seed: int = 1,
    gpus: int = 4,
    challenges: int = 1000,
    prover: Prover | None = None,
    **kw: object,
) -> SnarkMarket:
    """A busy market (clients outnumber every ask) with no other providers
    unless given: the node's asks are taken as soon as they open."""
    settings: dict[str, object] = {
        "demand": DemandConfig(curve=((0.0, 3000.0),)),
        "providers": (),
        "node_gpus": gpus,
        "node_challenges": challenges,
        "client_max_price_nfil": 10**9,
    }
    settings.update(kw)
    config = MarketConfig(**settings)  # type: ignore[arg-type]
    market = SnarkMarket(config, clock=clock, seed=seed, prover=prover)
    market.set_meta(True, WALLET, PRICE_ATTO)
    return market


def _run(market: SnarkMarket, clock: Clock, seconds: float, step: float = 1.0) -> None:
    end = clock.t + seconds
    while clock.t < end:
        clock.t = min(end, clock.t + step)
        market.sync()


def test_the_node_fills_to_8_waiting_and_asks_again_at_5() -> None:
    clock = Clock()
    market = _market(clock, gpus=0)
    _run(market, clock, 120)
    node = market.node
    # 8 - 0 waiting: eight asks, each taken at once, then no more.
    assert (len(node.rows), node.counters.asks_created, node.counters.adder_commits) == (8, 8, 1)
    assert node.meta.request_task_id is None
    assert node.counters.queue_count == 8
    # Three machines take three rows: 5 wait, which is not above the low
    # water mark, so the Adder asks for 8 - 5 more.
    market.set_gpus(3)
    _run(market, clock, 30)
    assert node.counters.asks_created == 11 and len(node.rows) == 11
    assert node.counters.adder_commits == 2


def test_six_waiting_rows_are_above_the_low_water_mark() -> None:
    clock = Clock()
    market = _market(clock, gpus=0)
    _run(market, clock, 120)
    market.set_gpus(2)  # 6 wait: no new request task
    _run(market, clock, 60)
    assert market.node.counters.adder_commits == 1
    assert market.node.counters.queue_count == 6


def test_a_row_gets_a_task_id_long_before_a_machine_takes_it() -> None:
    clock = Clock()
    market = _market(clock, gpus=0)
    _run(market, clock, 120)
    rows = market.node.rows
    # One row per 10 s gets a task (task_prove.go's Adder); none is owned.
    assert all(r.compute_task_id is not None and not r.owned for r in rows)
    assert market.node.queue_count() == 8


def test_the_prove_adder_gives_one_row_a_task_each_10_seconds() -> None:
    clock = Clock()
    market = _market(clock, gpus=0)
    _run(market, clock, 5)
    first = sum(r.compute_task_id is not None for r in market.node.rows)
    _run(market, clock, 10)
    second = sum(r.compute_task_id is not None for r in market.node.rows)
    assert (first, second) == (0, 1)


def test_a_node_that_cannot_keep_up_is_penalised_and_its_late_proofs_are_gone() -> None:
    clock = Clock()
    market = _market(clock, gpus=0, challenges=1000)
    _run(market, clock, 120)
    late = {r.request_cid for r in market.node.rows}
    acc = market.node_account()
    assert acc is not None and len(late) == 8
    _run(market, clock, DEADLINE_S - 180, step=60)  # 44 minutes in: not yet
    assert acc.penalties == 0
    _run(market, clock, 120, step=60)
    assert acc.penalties == 8 and acc.challenges == 1000 - 8 * 50
    # The machines come back and prove the rows: every answer is gone (410),
    # and its row deleted; new work then comes in.
    market.set_gpus(8)
    _run(market, clock, 300, step=10)
    node = market.node
    assert node.counters.gone == 8
    assert not late & {r.request_cid for r in node.rows}
    assert not late & {p.request_cid for p in node.payments}
    assert node.counters.asks_created > 8


def test_challenge_proofs_earn_the_slots_a_new_provider_lacks() -> None:
    clock = Clock()
    market = _market(clock, gpus=8, challenges=0, node_porep_s=30.0)
    _run(market, clock, 600, step=5)
    acc = market.node_account()
    assert acc is not None
    assert acc.challenges_done >= 50 and acc.slots >= 1
    assert market.node.counters.challenges_done == acc.challenges_done
    # With a slot, paid work comes in.
    _run(market, clock, 600, step=5)
    assert acc.paid_proofs > 0 and market.node.payments
    assert any(r.was_pow for r in market.node.rows)


def test_while_held_the_adder_asks_for_nothing() -> None:
    clock = Clock()
    market = _market(clock)
    market.set_hold(True)
    _run(market, clock, 30)
    counters = market.node.counters
    assert counters.asks_created == 0 and counters.hold == {"hold": 10}
    market.set_hold(False)
    _run(market, clock, 3)
    assert counters.asks_created == 8 and counters.hold == {"hold": 10, "pass": 1}


def test_a_price_the_service_refuses_fails_the_task_and_it_runs_again_in_10_s() -> None:
    clock = Clock()
    market = _market(clock)
    market.set_meta(True, WALLET, 10**8)  # 0.1 nFIL: not whole nFIL
    _run(market, clock, 25)
    counters = market.node.counters
    assert counters.asks_created == 0
    assert counters.request_errors == 3  # at 3 s, 13 s and 23 s
    assert market.node.meta.request_task_id is not None  # the same task, retried


def test_disabling_stops_new_request_tasks_not_the_running_one() -> None:
    clock = Clock()
    market = _market(clock, gpus=0, demand=DemandConfig(curve=((0.0, 0.0),)))
    _run(market, clock, 3)
    market.set_meta(False, WALLET, PRICE_ATTO)
    _run(market, clock, 60)
    # No client: the asks stay open, and the loop keeps polling them.
    assert market.node.meta.request_task_id is not None
    acc = market.node_account()
    assert acc is not None and len(acc.asks) == 8


def test_payments_are_settled_every_2_minutes_once_worth_the_gas() -> None:
    clock = Clock()
    market = _market(clock, gpus=4, node_porep_s=60.0, node_snap_s=96.0)
    _run(market, clock, 600, step=10)
    node = market.node
    assert node.payments and node.settlements
    last = node.settlements[-1]
    assert (last.settled_at - T0) % 120 == 0
    acc = market.node_account()
    assert acc is not None and acc.redeemed_nonce == last.nonce
    assert node.counters.settle_fees_atto == len(node.settlements) * 100 * 50_000_000 * 12 // 10


def test_no_settlement_below_500_times_the_network_fee() -> None:
    clock = Clock()
    node_cfg = replace(MarketConfig().node, base_fee_atto=10**9)  # 1 nFIL/gas: 30 FIL minimum
    market = _market(clock, gpus=4, node_porep_s=60.0, node=node_cfg)
    _run(market, clock, 600, step=10)
    assert market.node.payments and not market.node.settlements


def _history(seed: int, steps: list[float]) -> tuple[object, ...]:
    clock = Clock()
    providers = None  # drawn from the seed
    market = _market(clock, seed=seed, challenges=500, providers=providers, demand=DemandConfig())
    for step in steps:
        clock.t += step
        market.sync()
    report = market.report()
    rows = [(r.request_cid, r.obtained_at, r.compute_done, r.submit_done) for r in market.node.rows]
    return report, rows, market.service.price_history


def test_a_seed_gives_one_history_whatever_the_clock_steps() -> None:
    hours = 2 * 3600.0
    in_seconds = _history(7, [1.0] * int(hours))
    in_minutes = _history(7, [60.0] * int(hours / 60))
    at_once = _history(7, [hours])
    assert in_seconds == in_minutes == at_once


def test_another_seed_gives_another_history() -> None:
    one, other = _history(7, [3600.0]), _history(8, [3600.0])
    assert one[0]["providers"] != other[0]["providers"]  # type: ignore[index]
    assert one[1] != other[1] and one[2] != other[2]


def test_given_providers_and_demand_a_seed_still_decides_the_clients() -> None:
    spec = ProviderSpec("p", 4, 4_500_000, challenges=500)
    clock = Clock()
    one, other = (_market(clock, seed=s, providers=(spec,), demand=DemandConfig()) for s in (1, 2))
    clock.t += 3600
    assert one.report()["counts"] != other.report()["counts"]


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=5)
    loop.close()


def test_an_async_prover_proves_the_rows_as_coroutines(loop: asyncio.AbstractEventLoop) -> None:
    clock = Clock()
    seen: list[ProofJob] = []

    async def prove(job: ProofJob) -> bool:
        seen.append(job)
        await asyncio.sleep(0)
        return True

    market = _market(clock, prover=AsyncProver(prove, 2, loop, clock))
    deadline = time.monotonic() + 10
    while market.node.counters.submitted < 2:
        assert time.monotonic() < deadline, "no proof came back from the coroutines"
        clock.t += 1
        market.sync()
        time.sleep(0.001)
    assert {job.kind for job in seen} <= {"porep", "snap"}
    assert market.node.payments


class _Recording(SimulatedProver):
    def __init__(self) -> None:
        super().__init__(1, porep_s=20.0, snap_s=20.0, fail_rate=1.0)
        self.starts: list[tuple[float, ProofJob]] = []

    def start(self, job: ProofJob) -> None:
        assert self._sched is not None
        self.starts.append((self._sched.now, job))
        super().start(job)


def test_a_failed_attempt_is_retried_no_sooner_than_10_s_x_retries() -> None:
    clock = Clock()
    prover = _Recording()
    market = _market(clock, prover=prover)
    _run(market, clock, 300)
    first = prover.starts[0][1].task_id
    attempts = [(t, job.retries) for t, job in prover.starts if job.task_id == first]
    assert [r for _, r in attempts] == list(range(len(attempts))) and len(attempts) >= 3
    for (before, _), (after, retries) in itertools.pairwise(attempts):
        assert after >= before + 20.0 + 10.0 * retries
