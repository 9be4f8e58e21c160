"""The other providers: seeded nodes that ask, prove on their GPUs and sometimes fail.

Touches the `MarketService` (asks, answers) and the `Scheduler` (proof
completions). Each keeps as many asks open as would keep its GPUs busy with
one proof to spare (GPUs + 1 - proofs held), within its free slots and only
in its online hours; it never asks without a free slot (so it earns no
challenge proofs). Work assigned to it is proved in order on its GPUs, each
proof taking its kind's time x U(0.95, 1.1); with probability `fail_rate` a
proof is never returned (the machine was lost): the service penalises the
provider at the deadline and gives the work to another, at its old price.
It looks at its asks again after every change and every minute.
"""

from __future__ import annotations

import random
from collections import deque
from functools import partial

from simulator.curio.fil import ATTO_PER_NFIL

from .config import ProviderSpec
from .events import Scheduler
from .service import MarketService, WorkRequest

__all__ = ["SimProvider"]


class SimProvider:
    """One simulated provider (module doc)."""

    def __init__(self, spec: ProviderSpec, service: MarketService, sched: Scheduler, seed: int):
        self.spec = spec
        self.wallet = spec.wallet
        self.service = service
        self.sched = sched
        self.busy = 0
        self.queue: deque[WorkRequest] = deque()
        self.lost = 0
        self._rng = random.Random(f"{seed}:snark-provider:{spec.name}")
        service.account(self.wallet, spec.challenges)

    def assigned(self, req: WorkRequest) -> None:
        """The service gave it `req`."""
        self.queue.append(req)
        self._start()

    def _start(self) -> None:
        while self.busy < self.spec.gpus and self.queue:
            req = self.queue.popleft()
            if req.state != "assigned" or req.provider != self.wallet:
                continue  # the deadline passed while it waited
            self.busy += 1
            seconds = self.spec.snap_s if req.kind == "snap" else self.spec.porep_s
            seconds *= self._rng.uniform(0.95, 1.1)
            lost = self._rng.random() < self.spec.fail_rate
            self.sched.after(seconds, partial(self._finish, req, lost))

    def _finish(self, req: WorkRequest, lost: bool) -> None:
        self.busy -= 1
        if lost:
            self.lost += 1
        else:
            self.service.respond_work(self.wallet, req.cid)
        self._start()
        self.refill()

    def refill(self) -> None:
        """Open asks up to what keeps its GPUs busy (module doc)."""
        if not self.spec.online(self.sched.now):
            return
        acc = self.service.account(self.wallet)
        want = self.spec.gpus + 1 - self.busy - len(self.queue)
        while len(acc.asks) < want and acc.free > 0:
            self.service.create_ask(self.wallet, self.spec.price_nfil * ATTO_PER_NFIL)
            want = self.spec.gpus + 1 - self.busy - len(self.queue)
