"""The Snark Market's settings, and its rules' numbers with their sources.

Touches nothing. Sources: "doc" is curio
documentation/en/experimental-features/Snark-Market.md (the market
service's rules: its code is not public); "curio" is filecoin-project/curio's
source. docs/SIMULATOR.md, "The Snark Market", says what each does.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Literal

from simulator.curio.address import key_address
from simulator.demand import DemandConfig

__all__ = [
    "DEADLINE_S",
    "DECI_COST",
    "MAX_PRICE_NFIL",
    "PENALTY_CHALLENGES",
    "SLOT_CHALLENGES",
    "SNAP_FACTOR",
    "WITHDRAW_CHALLENGES",
    "MarketConfig",
    "NodeConfig",
    "ProofKind",
    "ProviderSpec",
    "default_providers",
]

ProofKind = Literal["porep", "snap"]
#: Who proves the operator's node's rows (docs/SIMULATOR.md, "The Snark
#: Market"): its own simulated GPUs, or the vast simulator's rented machines.
ProverKind = Literal["simulated", "fleet"]

#: curio lib/proofsvc/common ``ProofData.DeciCost()``: a proof's size in
#: tenths of a "P" (10 x 130M constraints, one 32 GiB PoRep C2). A client
#: pays ``price x cost / 10`` (tasks/proofshare/task_client_send.go).
DECI_COST: dict[ProofKind, int] = {"porep": 10, "snap": 16}
#: A Snap proof's time over a PoRep's, on any machine: its size in P (16
#: tenths against 10), the ratio every prover of the market uses (ours).
SNAP_FACTOR = DECI_COST["snap"] / DECI_COST["porep"]
#: doc: "Number of work slots is calculated by dividing 'completed challenge
#: proofs' by 50".
SLOT_CHALLENGES = 50
#: doc: "Failure to complete assigned work within the deadline reduces
#: 'completed challenge proofs' balance by 50 proofs".
PENALTY_CHALLENGES = 50
#: doc: "Withdrawing an ask from the market ... reduces 'completed challenge
#: proofs' balance by 1 proof".
WITHDRAW_CHALLENGES = 1
#: doc: "Proofs must complete within 45 minutes".
DEADLINE_S = 45 * 60.0
#: The most a FIL is worth in dollars here, the walk's ceiling (ours).
FIL_USD_MAX = 10_000.0
#: curio lib/proofsvc/common/types.go ``MaxPrice = types.FromFil(1)`` (unused
#: in Curio: taken as the service's ceiling), in nFIL.
MAX_PRICE_NFIL = 10**9


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    """Another provider on the market: its GPUs, ask price and habits."""

    name: str
    gpus: int
    #: Its asks' minimum price, nFIL per P.
    price_nfil: int
    #: Seconds one GPU takes for a PoRep and a Snap (each proof x U(0.95, 1.1)).
    porep_s: float = 120.0
    snap_s: float = 192.0
    #: Completed challenge proofs at the start (slots = this // 50).
    challenges: int = 500
    #: The chance it never returns a proof it took (a lost machine): the
    #: service penalises it at the deadline and gives the work to another.
    fail_rate: float = 0.0
    #: UTC hours [start, end) in which it creates asks (None: always; end <
    #: start wraps midnight). Outside them it finishes what it holds.
    online_hours: tuple[float, float] | None = None

    @property
    def wallet(self) -> str:
        return key_address(f"snark-provider:{self.name}")

    def online(self, t: float) -> bool:
        if self.online_hours is None:
            return True
        hour = (t % 86_400.0) / 3600.0
        start, end = self.online_hours
        return start <= hour < end if start <= end else hour >= start or hour < end


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """The operator's Curio node: tasks/proofshare's constants (curio)."""

    #: task_request.go ``ProofRequestPollInterval``: the Adder's tick and the
    #: request loop's poll.
    request_poll_s: float = 3.0
    #: task_request.go ``maxPollBackoff``: the poll after 429s doubles up to it.
    max_poll_backoff_s: float = 120.0
    #: task_request.go ``RequestQueueLowWaterMark`` / ``HighWaterMark``.
    low_water: int = 5
    high_water: int = 8
    #: task_prove.go ``ProveAdderInterval``: one row gets a task per tick.
    prove_adder_s: float = 10.0
    #: task_prove.go ``RetryWait``: 10 s x retries; ``MaxFailures`` 20.
    prove_retry_s: float = 10.0
    prove_max_failures: int = 20
    #: task_prove.go ``ProveCleanupInterval``, and the 2 days after which
    #: submitted rows are deleted.
    cleanup_s: float = 300.0
    keep_submitted_s: float = 2 * 86_400.0
    #: task_submit.go ``SubmitScheduleInterval``.
    submit_s: float = 10.0
    #: task_request.go Do's ``RetryWait`` (a failed request task runs again).
    request_retry_s: float = 10.0
    #: task_autosettle.go: every 2 min, settle when the unsettled amount is
    #: over base fee x 50M gas x 1.2 x 500 (0.2 % of it pays the gas).
    autosettle_s: float = 120.0
    settle_gas: int = 50_000_000
    #: The chain's parent base fee, attoFIL per gas (a quiet mainnet's).
    base_fee_atto: int = 100


@dataclass(frozen=True, slots=True)
class MarketConfig:
    """The market around the operator's node. Defaults: about 25 GPUs of
    other providers priced near 0.005 FIL/P, and 300 client proofs an hour."""

    #: All randomness (None: the simulator's seed).
    seed: int | None = None
    #: Clients' requests per hour along a daily curve (simulator/demand.py;
    #: its bursts and events apply, its deadline does not: the market's is 45 min).
    demand: DemandConfig = field(default_factory=lambda: DemandConfig(curve=((0.0, 300.0),)))
    #: The share of requests that are SnapDeals proofs (1.6 P); the rest PoRep.
    snap_share: float = 0.3
    #: The market price at the start, nFIL per P (doc: 0.005 FIL/P "for testing").
    start_price_nfil: int = 5_000_000
    #: Each client's most it pays per P: median and log-normal spread. A
    #: request arriving while the market price is above its client's most is
    #: not bought (counted ``refused``).
    client_max_price_nfil: int = 12_000_000
    client_price_sigma: float = 0.35
    #: The price rule (docs/SIMULATOR.md): every interval the price moves
    #: `price_smoothing` of the way to the clearing price, or up by
    #: `shortage_step` when the open asks cannot cover the demand.
    price_interval_s: float = 60.0
    price_smoothing: float = 0.5
    shortage_step: float = 0.1
    #: A request no ask has taken this long after its arrival is dropped
    #: (the client went elsewhere); retried work never expires.
    request_expire_s: float = 7200.0
    #: The other providers (None: `provider_count` drawn from the seed).
    providers: tuple[ProviderSpec, ...] | None = None
    provider_count: int = 5
    #: Completed challenge proofs the service credits the operator's wallet
    #: with when it first sees it (a new provider has none).
    node_challenges: int = 0
    #: The simulated prover's GPUs and proof times (simulator/snark_market/prover.py).
    node_gpus: int = 4
    node_porep_s: float = 120.0
    node_snap_s: float = 192.0
    node: NodeConfig = field(default_factory=NodeConfig)
    #: Who proves the node's rows: ``simulated`` (`node_gpus` GPUs) or
    #: ``fleet`` (the vast simulator's rented machines that are proving:
    #: simulator/snark_market/fleet_prover.py; `SimServer` makes it).
    prover: ProverKind = "simulated"
    #: Dollars per FIL at the start (``GET /api/v3/simple/price``), and the
    #: spread of its seeded walk: each sim hour the log of the rate moves by
    #: N(0, `fil_usd_walk`) (0: it stays).
    fil_usd: float = 2.5
    fil_usd_walk: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.snap_share <= 1:
            raise ValueError("snap_share is in [0, 1]")
        if not 0 < self.start_price_nfil <= MAX_PRICE_NFIL or self.client_max_price_nfil <= 0:
            raise ValueError("prices are > 0 nFIL and the start at most 1 FIL")
        if self.price_interval_s <= 0 or not 0 < self.price_smoothing <= 1:
            raise ValueError("price_interval_s > 0 and price_smoothing in (0, 1]")
        if min(self.shortage_step, self.client_price_sigma, self.request_expire_s) < 0:
            raise ValueError("shortage_step, client_price_sigma, request_expire_s are >= 0")
        if self.node_gpus < 0 or min(self.node_porep_s, self.node_snap_s) <= 0:
            raise ValueError("node_gpus >= 0 and proof times > 0")
        if self.node_challenges < 0 or self.provider_count < 0:
            raise ValueError("node_challenges and provider_count are >= 0")
        if self.prover not in ("simulated", "fleet"):
            raise ValueError("prover is simulated or fleet")
        if not 0 < self.fil_usd <= FIL_USD_MAX or not 0 <= self.fil_usd_walk <= 1:
            raise ValueError(f"fil_usd is in (0, {FIL_USD_MAX:g}] and fil_usd_walk in [0, 1]")

    def provider_specs(self, seed: int) -> tuple[ProviderSpec, ...]:
        """The given providers, or `provider_count` drawn from `seed`."""
        if self.providers is not None:
            return self.providers
        return default_providers(seed, self.provider_count, self.start_price_nfil)


def default_providers(seed: int, count: int, price_nfil: int) -> tuple[ProviderSpec, ...]:
    """`count` providers from their own stream: 2-8 GPUs, ask prices
    log-normal around `price_nfil` (sigma 0.3, rounded to 1 μFIL), PoRep
    100-160 s (Snap 1.6x), 2-6 spare slots, one in four losing 1-3 % of its
    proofs, one in four asking only from 18:00 to 06:00 UTC."""
    rng = random.Random(f"{seed}:snark-providers")
    out = []
    for i in range(count):
        gpus = rng.randint(2, 8)
        price = max(1000, round(price_nfil * math.exp(rng.gauss(0.0, 0.3)), -3))
        porep = rng.uniform(100.0, 160.0)
        out.append(
            ProviderSpec(
                name=f"p{i + 1}",
                gpus=gpus,
                price_nfil=int(price),
                porep_s=round(porep, 1),
                snap_s=round(porep * SNAP_FACTOR, 1),
                challenges=50 * (gpus + rng.randint(2, 6)),
                fail_rate=rng.choice((0.0, 0.0, 0.0, rng.uniform(0.01, 0.03))),
                online_hours=rng.choice((None, None, None, (18.0, 6.0))),
            )
        )
    return tuple(out)
