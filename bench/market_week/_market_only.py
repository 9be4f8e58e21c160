"""The market alone for a week: the Snark Market with the operator's node
holding a fixed number of GPUs at a fixed ask price (path "fixed"), and the
best such pair over a small grid.

Touches nothing outside the process but, for the offer book, an in-process
vast.ai simulator (`offer_book`: the GPUs' price). The market is
`simulator.snark_market.SnarkMarket` driven on its own clock, as the tests
drive it: no server, no agent. One week of it runs in a few seconds.

What a run is (`run_market`):

- the market's settings are `WeekSetup.market_config`: clients' requests
  along `curve` (requests/h by UTC hour) with three bursts a day, the
  simulator's default other providers (five, drawn from the seed), its
  default client prices and price rule; the clock starts at `WEEK_EPOCH`
  (UTC midnight), so the curve's hours are the clock's;
- the node's wallet starts with `challenges` completed challenge proofs
  (the fixed path: enough for its N GPUs, `max(setup.challenges, 50 N)`),
  and is enabled at the ask price from the first second; the node is
  Curio's (simulator/snark_market/node.py) with two bookkeeping periods
  changed (`BENCH_NODE`): submitted rows are kept 10 minutes, not two days,
  and autosettle looks every hour, not every 2 minutes. Neither changes a
  request, an ask, a proof or a payment (submitted rows are never looked at
  again, and settling only redeems vouchers); both keep a week linear in
  time: the node scans its rows every 3 s and every payment at each
  autosettle (`test_the_bench_node_keeps_the_market_s_history`);
- the prover is `SimulatedProver`: N GPUs, PoRep 120 s, Snap 192 s (the
  simulator's; 30 P/h a GPU, Snap being 1.6 P);
- the day's figures come from the service's account of the wallet and its
  counters, read at each day's end; slots are sampled every 5 minutes.

The GPUs' cost (`gpu_hour_usd`) is taken from the vast.ai simulator's offer
book for the seed, listed as the agent lists it (its guardrails, the
demand day's prover): the cheapest offers by $ per proof (rental plus
transfer) that together prove as much as the largest fleet swept, their $
per proof times the 30 P/h a simulated GPU proves. Revenue in dollars is at
`FIL_USD` (2.5 $/FIL: the simulator has no FIL price; docs/operations/snark-market.md's
example `fil_usd=2.5`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from activities.fleet_results import offer_row
from fleet_agent.fleet.guardrails import offer_refusal
from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.fleet.offer_query import allowed_gpu_names, offer_filters
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.models import AgentConfig
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator.curio.address import key_address
from simulator.curio.fil import ATTO_PER_FIL, ATTO_PER_NFIL
from simulator.demand import DemandConfig, parse_curve
from simulator.fate import MEAN_RATE_JITTER
from simulator.server import SimServer
from simulator.snark_market import (
    DECI_COST,
    SLOT_CHALLENGES,
    MarketConfig,
    NodeConfig,
    SimulatedProver,
    SnarkMarket,
)
from testkit.sim_helpers import SIM_RAM_GIB

__all__ = [
    "BENCH_NODE",
    "DAY_S",
    "DEFAULT_CURVE",
    "FIL_USD",
    "GPU_PROOFS_PER_HOUR",
    "WALLET",
    "WEEK_EPOCH",
    "BookPrice",
    "MarketDay",
    "MarketRun",
    "Request",
    "WeekSetup",
    "best_fixed",
    "book_prover",
    "fixed_days",
    "gpu_hour_usd",
    "offer_book",
    "run_market",
    "sweep_fixed",
]

DAY_S = 86_400.0
#: The market's clock at the week's start: UTC midnight, years ahead of any
#: wall clock (the demand day's `DAY_EPOCH`, bench/demand_day/_lockstep.py,
#: not imported from there: that module imports the worker).
WEEK_EPOCH = datetime(2040, 1, 1, tzinfo=UTC).timestamp()
#: Clients' requests per hour by UTC hour: the demand day's curve (a quiet
#: night, a working-day rise, an afternoon peak).
DEFAULT_CURVE = "0:250,5:200,9:450,13:700,17:600,21:350"
#: Dollars per FIL (module doc).
FIL_USD = 2.5
#: Curio's node but for two bookkeeping periods (module doc).
BENCH_NODE = NodeConfig(keep_submitted_s=600.0, autosettle_s=3600.0)
#: The operator's wallet (an f1 key address; the service credits it with
#: the run's challenges the first time it sees it).
WALLET = key_address("market-week-node")
#: How often a run samples the node's slots.
SAMPLE_S = 300.0
#: P (PoRep-sized proofs) an hour a simulated GPU proves: PoRep in 120 s.
GPU_PROOFS_PER_HOUR = 30.0


@dataclass(frozen=True, slots=True)
class WeekSetup:
    """What every path of the week shares."""

    days: int = 7
    #: Clients' requests per hour by UTC hour ("HOUR:RATE,...").
    curve: str = DEFAULT_CURVE
    bursts_per_day: float = 3.0
    #: The node's completed challenge proofs at the start (800: 16 slots).
    challenges: int = 800
    fil_usd: float = FIL_USD

    def demand(self) -> DemandConfig:
        """The clients' arrivals: the curve, bursts of about 45 minutes at up
        to twice it (the demand day's; its deadline is not the market's)."""
        return DemandConfig(
            curve=parse_curve(self.curve),
            burst_rate_per_day=self.bursts_per_day,
            burst_minutes=45.0,
            burst_multiplier=2.0,
        )

    def market_config(self, gpus: int = 0, challenges: int | None = None) -> MarketConfig:
        """The market every path runs on (module doc); `gpus` for the simulated prover."""
        start = self.challenges if challenges is None else challenges
        return MarketConfig(
            demand=self.demand(), node_challenges=start, node_gpus=gpus, node=BENCH_NODE
        )


@dataclass(frozen=True, slots=True)
class Request:
    """A request a client bought: when (seconds from the week's start), its
    size in P, its price, nFIL per P (what every assignment of it pays), and
    the ask price of the provider that held it last (None: none ever did;
    the node's: the run's price)."""

    at: float
    p: float
    price_nfil: int
    ask_nfil: int | None
    ours: bool = False

    @property
    def pay_nfil(self) -> float:
        return self.p * self.price_nfil


@dataclass(slots=True)
class MarketDay:
    """One day of a market-only run, from the service's books."""

    day: int
    paid_proofs: int = 0
    revenue_fil: float = 0.0
    challenge_proofs: int = 0
    penalties: int = 0
    withdrawals: int = 0
    #: The market's, all providers': requests that arrived (bought), that
    #: clients refused at the price, that expired unassigned.
    arrived: int = 0
    refused: int = 0
    expired: int = 0
    #: The node's slots at the day's end; the most it held at a sample, and
    #: the samples at which it held more than its slots.
    slots: int = 0
    peak_used: int = 0
    over_slots: int = 0
    mean_price_nfil: float = 0.0


@dataclass(slots=True)
class MarketRun:
    """A week of the market with the node at `gpus` and `price_nfil`
    (`gpus` 0 and `enabled` False: the market without the node)."""

    seed: int
    gpus: int
    price_nfil: int
    enabled: bool
    challenges: int
    days: list[MarketDay] = field(default_factory=list)
    #: Every request clients bought, all providers', in arrival order.
    requests: list[Request] = field(default_factory=list)
    cpu_s: float = 0.0

    def profit_usd(self, usd_gpu_h: float, fil_usd: float, days: slice = slice(1, None)) -> float:
        """Revenue less the GPUs' rental over `days` (default: days 2 on)."""
        picked = self.days[days]
        revenue = sum(d.revenue_fil for d in picked) * fil_usd
        return revenue - self.gpus * usd_gpu_h * 24 * len(picked)


def run_market(
    setup: WeekSetup,
    seed: int,
    gpus: int,
    price_nfil: int,
    *,
    enabled: bool = True,
    challenges: int | None = None,
) -> MarketRun:
    """The market for `setup.days` with the node as given (module doc)."""
    start_challenges = setup.challenges if challenges is None else challenges
    now = [WEEK_EPOCH]
    market = SnarkMarket(
        setup.market_config(gpus, start_challenges),
        clock=lambda: now[0],
        seed=seed,
        prover=SimulatedProver(gpus, seed=seed),
    )
    run = MarketRun(seed, gpus, price_nfil, enabled, start_challenges)
    started = time.process_time()
    if enabled:
        market.set_meta(True, WALLET, price_nfil * ATTO_PER_NFIL)
    svc = market.service
    acc = svc.account(WALLET, start_challenges)
    samples_a_day = round(DAY_S / SAMPLE_S)
    before = (acc.paid_proofs, acc.cumulative_atto, acc.challenges_done, acc.penalties)
    counts = dict(svc.counts)
    for day in range(setup.days):
        figures = MarketDay(day + 1)
        for i in range(1, samples_a_day + 1):
            now[0] = WEEK_EPOCH + day * DAY_S + i * SAMPLE_S
            market.sync()
            figures.peak_used = max(figures.peak_used, acc.used)
            figures.over_slots += acc.used > acc.slots
        after = (acc.paid_proofs, acc.cumulative_atto, acc.challenges_done, acc.penalties)
        figures.paid_proofs = after[0] - before[0]
        figures.revenue_fil = (after[1] - before[1]) / ATTO_PER_FIL
        figures.challenge_proofs = after[2] - before[2]
        figures.penalties = after[3] - before[3]
        figures.withdrawals = acc.withdrawals - sum(d.withdrawals for d in run.days)
        figures.arrived = svc.counts["arrived"] - counts["arrived"]
        figures.refused = svc.counts["refused"] - counts["refused"]
        figures.expired = svc.counts["expired"] - counts["expired"]
        figures.slots = acc.slots
        day_start = WEEK_EPOCH + day * DAY_S
        prices = [p for t, p in svc.price_history if day_start < t <= day_start + DAY_S]
        figures.mean_price_nfil = sum(prices) / len(prices) if prices else float(svc.price_nfil)
        run.days.append(figures)
        before, counts = after, dict(svc.counts)
    asks = {p.wallet: p.spec.price_nfil for p in market.providers.values()}
    asks[WALLET] = price_nfil
    run.requests = [
        Request(
            r.arrived_at - WEEK_EPOCH,
            DECI_COST[r.kind] / 10,
            r.price_nfil,
            None if r.provider is None else asks[r.provider],
            r.provider == WALLET,
        )
        for r in sorted(svc.requests.values(), key=lambda r: r.id)
        if not r.challenge
    ]
    run.cpu_s = round(time.process_time() - started, 2)
    return run


# ------------------------------------------------------------------ the book


def book_prover() -> ProverSpec:
    """The demand day's prover (the simulator's provers listen on loopback)."""
    return ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB)


#: The guardrails the book is listed under (the market day's, bench/market_day/_truth.py).
BOOK_CONFIG: dict[str, Any] = {
    "max_instances": 60,
    "max_fleet_dph": 60.0,
    "max_instance_dph": 3.0,
    "target_proofs_per_hour": 500.0,
}


async def offer_book(seed: int) -> list[dict[str, Any]]:
    """The offers the vast.ai simulator lists for `seed` at the week's start
    that the agent's guardrails allow, as offer rows (activities/fleet_results.py:
    estimated proofs/h, $/h with transfer, download speed): what
    bench/market_day/_drive.py `allowed_rows` lists, without the worker."""
    prover = book_prover()
    config = AgentConfig(**BOOK_CONFIG)
    with SimServer(
        seed=seed, speed=0, scenario="realistic", rate_limits=False, start_epoch=WEEK_EPOCH
    ) as sim:
        async with VastClient(
            sim.api_key, sim.url, timeout=5, backoff_base=0.01, pacing=NO_PACING
        ) as vast:
            names = allowed_gpu_names(config.allowed_gpus, await vast.gpu_names())
            found = await vast.search_offers_paged(
                offer_filters(config, prover, names),
                page_size=500,
                max_pages=6,
                allocated_storage=prover.disk_gb,
            )
    allowed = [o for o in found.offers if offer_refusal(o, config, prover) is None]
    return [offer_row(o, prover) for o in allowed]


@dataclass(frozen=True, slots=True)
class BookPrice:
    """A simulated GPU's price from the book (module doc)."""

    usd_gpu_h: float
    usd_per_p: float
    offers: int
    covers_p_per_h: float


def gpu_hour_usd(rows: Iterable[Mapping[str, Any]], gpus: int) -> BookPrice:
    """$ an hour of a simulated GPU (30 P/h): the cheapest offers per proof
    covering `gpus` such GPUs, their $ per P (rental and transfer over
    their expected rate, the estimate x the simulator's mean jitter)."""
    items = sorted(
        (
            (offer_dph(r) / (float(r["est_proofs_per_hour"]) * MEAN_RATE_JITTER), r)
            for r in rows
            if float(r.get("est_proofs_per_hour") or 0) > 0 and offer_dph(r) > 0
        ),
        key=lambda i: i[0],
    )
    if not items:
        raise ValueError("the book has no offer that proves")
    need = gpus * GPU_PROOFS_PER_HOUR
    dph = rate = 0.0
    used = 0
    for _, r in items:
        dph += offer_dph(r)
        rate += float(r["est_proofs_per_hour"]) * MEAN_RATE_JITTER
        used += 1
        if rate >= need:
            break
    per_p = dph / rate
    return BookPrice(round(per_p * GPU_PROOFS_PER_HOUR, 4), per_p, used, round(rate, 1))


# ----------------------------------------------------------------- the fixed path


def fixed_days(run: MarketRun, usd_gpu_h: float, fil_usd: float) -> list[dict[str, Any]]:
    """Each day of a fixed-fleet run as the harness reports a path's day."""
    out = []
    for d in run.days:
        revenue = d.revenue_fil * fil_usd
        cost = run.gpus * usd_gpu_h * 24
        out.append(
            {
                "day": d.day,
                "paid_proofs": d.paid_proofs,
                "revenue_fil": round(d.revenue_fil, 6),
                "revenue_usd": round(revenue, 4),
                "rental_usd": round(cost, 4),
                "transfer_usd": 0.0,  # in the GPU-hour's price (module doc)
                "llm_usd": 0.0,
                "profit_usd": round(revenue - cost, 4),
                "usd_per_proof": round(cost / d.paid_proofs, 5) if d.paid_proofs else None,
                "challenge_proofs": d.challenge_proofs,
                "penalties": d.penalties,
                "expired": d.expired,
                "slots": d.slots,
                "peak_slots_used": d.peak_used,
                "over_slots": d.over_slots,
                "gpus": run.gpus,
                "mean_price_nfil": round(d.mean_price_nfil),
            }
        )
    return out


def sweep_fixed(
    setup: WeekSetup,
    seed: int,
    gpus: Sequence[int],
    prices_nfil: Sequence[int],
    usd_gpu_h: float,
    *,
    refine: bool = True,
) -> list[MarketRun]:
    """Runs of the grid `gpus` x `prices_nfil`, each node starting with
    enough challenges for its GPUs; with `refine`, then every GPU count
    between the best one's neighbours in `gpus` at the best price (the
    profit over N is one hump: a coarse grid finds it, the fine one its top)."""
    runs = {
        (n, p): run_market(setup, seed, n, p, challenges=_enough(setup, n))
        for p in prices_nfil
        for n in gpus
    }
    if refine and len(gpus) > 1:
        best = best_fixed(runs.values(), usd_gpu_h, setup.fil_usd)
        ordered = sorted(gpus)
        i = ordered.index(best.gpus)
        lo = ordered[max(0, i - 1)]
        hi = ordered[min(len(ordered) - 1, i + 1)]
        for n in range(lo + 1, hi):
            if (n, best.price_nfil) not in runs:
                runs[n, best.price_nfil] = run_market(
                    setup, seed, n, best.price_nfil, challenges=_enough(setup, n)
                )
    return list(runs.values())


def _enough(setup: WeekSetup, gpus: int) -> int:
    """Challenges for a slot per GPU at least (the run's start otherwise)."""
    return max(setup.challenges, SLOT_CHALLENGES * gpus)


def best_fixed(runs: Iterable[MarketRun], usd_gpu_h: float, fil_usd: float) -> MarketRun:
    """The run with the most profit over days 2 on, among those without a
    penalty (any run, if every one had one)."""
    pool = list(runs)
    clean = [r for r in pool if not any(d.penalties for d in r.days)] or pool
    return max(clean, key=lambda r: (r.profit_usd(usd_gpu_h, fil_usd), -r.gpus))
