"""The Snark Market and the operator's node on the simulator's clock, behind one lock.

`SnarkMarket` touches nothing outside itself but the clock it is given (a
callable: the simulator's ``market.clock.now``, or a test's) and the
`Prover` it hands proofs to. Every public call takes `lock` and first runs
the market up to the clock (`sync`), so the web RPC answers what the market
stands at now, and stepping the clock in any pieces gives the same history
(events.py). With the `FleetProver` the lock is the vast market's own (one
lock for both: no lock order to get wrong), and the vast market runs this
one up to its clock before it looks at any machine (simulator/server.py).
All randomness comes from streams seeded by (seed, purpose): the
providers drawn, each minute's clients, each provider's and the prover's
draws; nothing reads the wall clock.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from functools import partial
from typing import Any

from .clients import Arrival, minute_arrivals
from .config import MarketConfig
from .events import Scheduler
from .fleet_prover import FleetProver
from .node import ProofshareNode
from .prover import Prover, SimulatedProver
from .providers import SimProvider
from .public import FilUsdWalk
from .service import Account, MarketService, WorkRequest

__all__ = ["SnarkMarket"]

#: Price points `report` lists (the newest).
_REPORT_PRICES = 60


class SnarkMarket:
    """Clients, other providers, the service and the operator's node."""

    def __init__(
        self,
        config: MarketConfig | None = None,
        *,
        clock: Callable[[], float],
        seed: int = 0,
        prover: Prover | None = None,
        lock: threading.RLock | None = None,
    ) -> None:
        cfg = self.config = config or MarketConfig()
        if cfg.prover == "fleet" and not isinstance(prover, FleetProver):
            raise ValueError(
                'prover="fleet" proves on the vast simulator\'s machines: '
                "SimServer(snark_market=...) makes the FleetProver"
            )
        self.seed = cfg.seed if cfg.seed is not None else seed
        #: The market's lock (a caller's, to share one: the fleet prover's vast market's).
        self.lock = lock or threading.RLock()
        self._clock = clock
        self._syncing = False
        start = clock()
        self.sched = Scheduler(start)
        self.service = MarketService(
            self.sched, self.seed, price_nfil=cfg.start_price_nfil, expire_s=cfg.request_expire_s
        )
        self.providers = {
            spec.wallet: SimProvider(spec, self.service, self.sched, self.seed)
            for spec in cfg.provider_specs(self.seed)
        }
        self.service.assigned_hook = self._assigned
        self.prover = prover or SimulatedProver(
            cfg.node_gpus, porep_s=cfg.node_porep_s, snap_s=cfg.node_snap_s, seed=self.seed
        )
        self.node = ProofshareNode(self.sched, self.service, self.prover, cfg.node)
        # Clients arrive from the next whole minute on, as simulator/demand.py's queue does.
        self._minute = math.ceil(start / 60.0)
        self.sched.every(60.0, self._clients, first=self._minute * 60.0)
        self.sched.every(cfg.price_interval_s, self._price)
        self.sched.every(60.0, self._refill, first=start)
        self.fil_usd = FilUsdWalk(cfg.fil_usd, cfg.fil_usd_walk, self.seed, start)

    # ------------------------------------------------------------- time

    def sync(self, until: float | None = None) -> float:
        """Run the market up to `until` (default: the clock); returns the
        time it stands at. A call from within the market's own events (the
        fleet prover reading the vast market) runs nothing."""
        with self.lock:
            if self._syncing:
                return self.sched.now
            self._syncing = True
            try:
                self.prover.pump()
                self.sched.run_until(self._clock() if until is None else until)
            finally:
                self._syncing = False
            return self.sched.now

    @contextmanager
    def session(self) -> Iterator[SnarkMarket]:
        """The lock held and the market run up to now (for a reader of several parts)."""
        with self.lock:
            self.sync()
            yield self

    def _clients(self) -> None:
        minute, self._minute = self._minute, self._minute + 1
        for arrival in minute_arrivals(self.config, self.seed, minute):
            self.sched.at(arrival.at, partial(self._arrive, arrival))

    def _arrive(self, arrival: Arrival) -> None:
        if self.service.price_nfil > arrival.max_price_nfil:
            self.service.counts["refused"] += 1
            return
        self.service.client_request(arrival.kind)

    def _price(self) -> None:
        cfg = self.config
        self.service.update_price(smoothing=cfg.price_smoothing, shortage_step=cfg.shortage_step)

    def _refill(self) -> None:
        for provider in self.providers.values():
            provider.refill()

    def _assigned(self, req: WorkRequest) -> None:
        provider = self.providers.get(req.provider or "")
        if provider is not None:
            provider.assigned(req)

    # ---------------------------------------------------------- controls

    def node_account(self) -> Account | None:
        """The service's account of the node's wallet (None: no wallet yet)."""
        wallet = self.node.meta.wallet
        return None if wallet is None else self.service.account(wallet)

    def set_meta(self, enabled: bool, wallet: str, pprice_atto: int) -> None:
        """PSSetMeta's effect; a wallet the service has not seen gets the
        configured `node_challenges`."""
        with self.session():
            if wallet not in self.service.accounts:
                self.service.account(wallet, self.config.node_challenges)
            self.node.set_meta(enabled, wallet, pprice_atto)

    def set_hold(self, hold: bool) -> None:
        """What ShouldHoldProofShare answers from now on."""
        with self.session():
            self.node.hold = hold

    def set_gpus(self, gpus: int) -> None:
        """The simulated prover's GPUs from now on (a proof running on a GPU
        taken away finishes first)."""
        if gpus < 0:
            raise ValueError("gpus is >= 0")
        with self.session():
            if not isinstance(self.prover, SimulatedProver):
                raise ValueError("only the simulated prover has GPUs to set")
            self.prover.gpus = gpus
            self.node.dispatch()

    def grant_challenges(self, wallet: str, count: int) -> int:
        """Add `count` completed challenge proofs to `wallet`; its new balance."""
        with self.session():
            acc = self.service.account(wallet)
            acc.challenges = max(0, acc.challenges + count)
            return acc.challenges

    def prover_fields(self, machine_id: int, started_at: float | None) -> dict[str, Any]:
        """A fleet machine's status counters, from the node's jobs on it
        (the vast market asks, already run up to now; {}: not the fleet prover)."""
        with self.lock:
            if isinstance(self.prover, FleetProver):
                return self.prover.prover_fields(machine_id, started_at)
            return {}

    # ------------------------------------------------------------ report

    def public_prices(self) -> tuple[int, float, float]:
        """(the market price in nFIL per P, dollars per FIL, the time they are at)."""
        with self.session():
            now = self.sched.now
            return self.service.price_nfil, self.fil_usd.at(now), now

    def report(self) -> dict[str, Any]:
        """The market as it stands: prices, counts, each provider and the node."""
        with self.session():
            svc = self.service
            return {
                "now": self.sched.now,
                "seed": self.seed,
                "price_nfil": svc.price_nfil,
                "fil_usd": self.fil_usd.at(self.sched.now),
                "prices": [[t, p] for t, p in svc.price_history[-_REPORT_PRICES:]],
                "counts": dict(svc.counts),
                "waiting": len(svc.waiting),
                "open_asks": len(svc.open_asks()),
                "providers": [
                    {
                        "name": p.spec.name,
                        "gpus": p.spec.gpus,
                        "busy": p.busy,
                        "ask_price_nfil": p.spec.price_nfil,
                        "online": p.spec.online(self.sched.now),
                        "lost": p.lost,
                        **_account(svc.account(p.wallet)),
                    }
                    for p in self.providers.values()
                ],
                "node": self._node_report(),
            }

    def _node_report(self) -> dict[str, Any]:
        node, acc = self.node, self.node_account()
        prover = self.prover
        return {
            "enabled": node.meta.enabled,
            "pprice_atto": str(node.meta.pprice_atto),
            "hold": node.hold,
            "rows": len(node.rows),
            "queue_count": node.queue_count(),
            "prover_free": prover.free(),
            "gpus": prover.gpus if isinstance(prover, SimulatedProver) else None,
            "fleet": prover.report() if isinstance(prover, FleetProver) else None,
            "payments": len(node.payments),
            "settlements": len(node.settlements),
            "unsettled_atto": str(node.unsettled_atto()),
            "counters": asdict(node.counters),
            "account": None if acc is None else _account(acc),
        }


def _account(acc: Account) -> dict[str, Any]:
    return {
        "wallet": acc.wallet,
        "provider_id": acc.provider_id,
        "challenges": acc.challenges,
        "slots": acc.slots,
        "used": acc.used,
        "open_asks": len(acc.asks),
        "assigned": len(acc.assigned),
        "paid_proofs": acc.paid_proofs,
        "earned_atto": str(acc.cumulative_atto),
        "redeemed_atto": str(acc.redeemed_atto),
        "challenges_done": acc.challenges_done,
        "penalties": acc.penalties,
        "withdrawals": acc.withdrawals,
        "gone": acc.gone,
    }
