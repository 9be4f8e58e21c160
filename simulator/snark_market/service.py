"""The market service: clients' requests, providers' asks, slots, penalties, vouchers.

Touches its own state and the `Scheduler` (deadlines, expiries); providers
learn of work by polling (`poll_work`, as Curio does) or, for the simulated
ones, through the `assigned` hook. What a provider calls is what Curio calls
at the service (curio lib/proofsvc/provictl.go: ``CreateWorkAsk``,
``PollWork``, ``WithdrawAsk``, ``GetProof``, ``RespondWork``) and at the
router contract (lib/proofsvc/common: ``getProviderState``,
``redeemProviderVoucher``). The rules (config.py has the numbers):

- **Slots.** A provider has ``challenges // 50`` work slots; each open ask
  and each paid proof assigned to it holds one (doc).
- **Asks.** ``create_ask`` with a free slot opens an ask at the provider's
  price (nFIL per P; a price that is not whole nFIL or over 1 FIL is a 400).
  Without one, the service assigns the new ask an unpaid challenge proof
  (a PoRep) instead (doc: challenge proofs "are assigned when attempting to
  create a work ask while the challenge balance is too low").
- **Assignment.** A request goes to the lowest-price open ask at or under
  its price (ties: the oldest ask), from a provider that has not failed it;
  an ask that opens takes the oldest waiting request it is eligible for
  (ToS 2.1: "matched automatically to the lowest-price eligible Provider").
  A request's price is the market price when it arrived, and every
  assignment of it, first or retry, pays that (doc: retries "come with
  non-current ... price").
- **Deadline.** Assigned work not returned within 45 minutes costs its
  provider 50 challenge proofs (never below 0; open asks beyond its slots
  then close) and goes back to the queue, ahead of newer requests, for
  another provider; the late answer is *gone* (HTTP 410 in provictl.go).
  A late challenge proof is gone too, and earns nothing, but costs nothing.
- **Withdrawal** of an open ask costs 1 challenge proof (doc).
- **Payment.** A paid proof returned in time gets a voucher: per provider,
  nonce + 1 (the first is 1) and the cumulative amount + price x cost / 10,
  in attoFIL. A challenge proof returned in time adds 1 to the balance and
  is answered ``pow: true``, with no voucher.
- **Settlement** redeems a provider's latest voucher at the router contract:
  its nonce must be above the last redeemed one.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from simulator.curio.address import actor_id
from simulator.curio.fil import ATTO_PER_NFIL

from .cids import raw_cid
from .config import (
    DEADLINE_S,
    DECI_COST,
    MAX_PRICE_NFIL,
    PENALTY_CHALLENGES,
    SLOT_CHALLENGES,
    WITHDRAW_CHALLENGES,
    ProofKind,
)
from .events import Scheduler
from .price import next_price

__all__ = [
    "Account",
    "MarketService",
    "Reward",
    "ServiceError",
    "WorkAsk",
    "WorkRequest",
    "WorkResponse",
]

RequestState = Literal["waiting", "assigned", "done", "expired"]


class ServiceError(Exception):
    """An HTTP answer other than 200 (provictl.go reads ``status - body``)."""

    def __init__(self, status: int, reason: str, body: str) -> None:
        super().__init__(f"{status} {reason} - {body}")
        self.status = status


@dataclass(slots=True)
class WorkRequest:
    """One client's proof (or a challenge) as the service tracks it."""

    id: int
    cid: str
    kind: ProofKind
    #: nFIL per P: the market price when it arrived (0: a challenge).
    price_nfil: int
    arrived_at: float
    challenge: bool = False
    state: RequestState = "waiting"
    provider: str | None = None
    ask_id: int | None = None
    assigned_at: float | None = None
    #: Assignments so far (1: first; more: retried after a missed deadline).
    attempts: int = 0
    failed_by: set[str] = field(default_factory=set)
    done_at: float | None = None

    @property
    def payment_nfil(self) -> int:
        """What the provider is paid for it: price x cost / 10."""
        return self.price_nfil * DECI_COST[self.kind] // 10


@dataclass(slots=True)
class WorkAsk:
    """An open ask (curio lib/proofsvc/common ``WorkAsk``)."""

    id: int
    provider: str
    price_nfil: int
    created_at: float


@dataclass(frozen=True, slots=True)
class WorkResponse:
    """``PollWork``'s answer: the work assigned to the provider and not yet
    returned (``WorkRequest{id, request_cid, done, work_ask_id}``), and its
    open asks."""

    requests: list[WorkRequest]
    active_asks: list[WorkAsk]


@dataclass(frozen=True, slots=True)
class Reward:
    """``RespondWork``'s answer (``ProofReward``): a voucher, or ``pow``."""

    pow: bool
    nonce: int = 0
    amount_atto: int = 0
    cumulative_atto: int = 0


@dataclass(slots=True)
class Account:
    """A provider's standing at the service, keyed by its wallet."""

    wallet: str
    provider_id: int
    challenges: int
    asks: dict[int, WorkAsk] = field(default_factory=dict)
    assigned: dict[int, WorkRequest] = field(default_factory=dict)
    nonce: int = 0
    cumulative_atto: int = 0
    #: The router contract's state for it (getProviderState).
    redeemed_atto: int = 0
    redeemed_nonce: int = 0
    paid_proofs: int = 0
    challenges_done: int = 0
    penalties: int = 0
    withdrawals: int = 0
    gone: int = 0

    @property
    def slots(self) -> int:
        return self.challenges // SLOT_CHALLENGES

    @property
    def used(self) -> int:
        """Slots held: open asks and paid proofs assigned."""
        return len(self.asks) + sum(1 for r in self.assigned.values() if not r.challenge)

    @property
    def free(self) -> int:
        return max(0, self.slots - self.used)


class MarketService:
    """The service's state and rules (module doc)."""

    def __init__(self, sched: Scheduler, seed: int, *, price_nfil: int, expire_s: float) -> None:
        self.sched = sched
        self.seed = seed
        self.price_nfil = price_nfil
        self.expire_s = expire_s
        self.accounts: dict[str, Account] = {}
        self.requests: dict[str, WorkRequest] = {}
        #: Requests no ask has taken, oldest (lowest id) first.
        self.waiting: list[tuple[int, WorkRequest]] = []
        #: Called when work is assigned to a provider (the simulated ones prove it).
        self.assigned_hook: Callable[[WorkRequest], None] | None = None
        #: (time, price) after each price update.
        self.price_history: list[tuple[float, int]] = []
        self._bought = 0
        self._request_ids = itertools.count(1)
        self._ask_ids = itertools.count(1)
        self.counts = {
            "arrived": 0,
            "refused": 0,
            "assigned": 0,
            "retries": 0,
            "done": 0,
            "expired": 0,
            "penalties": 0,
            "asks_created": 0,
            "challenges_assigned": 0,
            "withdrawals": 0,
            "gone": 0,
        }

    # ------------------------------------------------------------ accounts

    def account(self, wallet: str, challenges: int = 0) -> Account:
        """The provider's account, opened with `challenges` the first time."""
        acc = self.accounts.get(wallet)
        if acc is None:
            acc = Account(wallet, actor_id(wallet), challenges)
            self.accounts[wallet] = acc
        return acc

    def by_provider_id(self, provider_id: int) -> Account | None:
        return next((a for a in self.accounts.values() if a.provider_id == provider_id), None)

    def open_asks(self) -> list[WorkAsk]:
        return [ask for acc in self.accounts.values() for ask in acc.asks.values()]

    # -------------------------------------------------------------- clients

    def client_request(self, kind: ProofKind) -> WorkRequest:
        """A client's request at the current price: assigned at once if an
        ask takes it, else it waits (and expires unassigned)."""
        req = self._new_request(kind, self.price_nfil)
        self.counts["arrived"] += 1
        self._bought += 1
        if not self._match_request(req):
            self._wait(req)
            if self.expire_s > 0:
                self.sched.after(self.expire_s, lambda: self._expire(req))
        return req

    def _new_request(
        self, kind: ProofKind, price_nfil: int, *, challenge: bool = False
    ) -> WorkRequest:
        rid = next(self._request_ids)
        cid = raw_cid(f"{self.seed}:snark-request:{rid}")
        req = WorkRequest(rid, cid, kind, price_nfil, self.sched.now, challenge)
        self.requests[cid] = req
        return req

    def _wait(self, req: WorkRequest) -> None:
        req.state, req.provider, req.ask_id = "waiting", None, None
        bisect.insort(self.waiting, (req.id, req))

    def _expire(self, req: WorkRequest) -> None:
        if req.state == "waiting" and req.attempts == 0:
            self.waiting.remove((req.id, req))
            req.state = "expired"
            self.counts["expired"] += 1

    def update_price(self, *, smoothing: float, shortage_step: float) -> int:
        """One step of the price rule (price.py) on this interval's demand."""
        need = self._bought + len(self.waiting)
        asks = (ask.price_nfil for ask in self.open_asks())
        self.price_nfil = next_price(
            self.price_nfil, need, asks, smoothing=smoothing, shortage_step=shortage_step
        )
        self._bought = 0
        self.price_history.append((self.sched.now, self.price_nfil))
        return self.price_nfil

    # ------------------------------------------------------------ providers

    def create_ask(self, wallet: str, price_atto: int) -> int:
        """``CreateWorkAsk``: the new ask's id (module doc)."""
        if price_atto % ATTO_PER_NFIL or price_atto < 0:
            raise ServiceError(400, "Bad Request", "price must be a whole number of nFIL")
        price = price_atto // ATTO_PER_NFIL
        if price > MAX_PRICE_NFIL:
            raise ServiceError(400, "Bad Request", "price above the maximum of 1 FIL")
        acc = self.account(wallet)
        ask = WorkAsk(next(self._ask_ids), wallet, price, self.sched.now)
        self.counts["asks_created"] += 1
        if acc.free > 0:
            acc.asks[ask.id] = ask
            self._match_ask(ask)
            return ask.id
        req = self._new_request("porep", 0, challenge=True)
        self.counts["challenges_assigned"] += 1
        self._assign(req, ask)
        return ask.id

    def poll_work(self, wallet: str) -> WorkResponse:
        """``PollWork``: assigned work not yet returned, and open asks."""
        acc = self.account(wallet)
        return WorkResponse(list(acc.assigned.values()), list(acc.asks.values()))

    def withdraw_ask(self, wallet: str, ask_id: int) -> None:
        """``WithdrawAsk``: close an open ask for 1 challenge proof."""
        acc = self.account(wallet)
        if acc.asks.pop(ask_id, None) is None:
            raise ServiceError(404, "Not Found", "ask not found")
        acc.challenges = max(0, acc.challenges - WITHDRAW_CHALLENGES)
        acc.withdrawals += 1
        self.counts["withdrawals"] += 1
        self._trim(acc)

    def proof_kind(self, cid: str) -> ProofKind:
        """``GetProof``: what the request's proof is (the data itself is not modelled)."""
        return self.requests[cid].kind

    def respond_work(self, wallet: str, cid: str) -> Reward | None:
        """``RespondWork``: the reward, or None for *gone* (HTTP 410: the
        deadline passed and the work went to another provider)."""
        req = self.requests.get(cid)
        acc = self.account(wallet)
        if req is None or req.state != "assigned" or req.provider != wallet:
            acc.gone += 1
            self.counts["gone"] += 1
            return None
        del acc.assigned[req.id]
        req.state, req.done_at = "done", self.sched.now
        if req.challenge:
            acc.challenges += 1
            acc.challenges_done += 1
            return Reward(pow=True)
        self.counts["done"] += 1
        amount = req.payment_nfil * ATTO_PER_NFIL
        acc.nonce += 1
        acc.cumulative_atto += amount
        acc.paid_proofs += 1
        return Reward(False, acc.nonce, amount, acc.cumulative_atto)

    # ----------------------------------------------------------- settlement

    def provider_state(self, provider_id: int) -> tuple[int, int] | None:
        """``getProviderState``: (voucherRedeemed, lastNonce); None: unknown."""
        acc = self.by_provider_id(provider_id)
        return None if acc is None else (acc.redeemed_atto, acc.redeemed_nonce)

    def redeem(self, provider_id: int, cumulative_atto: int, nonce: int) -> None:
        """``redeemProviderVoucher``: ValueError if the voucher is not newer."""
        acc = self.by_provider_id(provider_id)
        if acc is None or nonce > acc.nonce or cumulative_atto > acc.cumulative_atto:
            raise ValueError("no such voucher")
        if nonce <= acc.redeemed_nonce:
            raise ValueError("voucher nonce already redeemed")
        acc.redeemed_atto, acc.redeemed_nonce = cumulative_atto, nonce

    # ------------------------------------------------------------- matching

    def _match_request(self, req: WorkRequest) -> bool:
        best: WorkAsk | None = None
        for ask in self.open_asks():
            if ask.price_nfil > req.price_nfil or ask.provider in req.failed_by:
                continue
            if best is None or (ask.price_nfil, ask.id) < (best.price_nfil, best.id):
                best = ask
        if best is None:
            return False
        del self.accounts[best.provider].asks[best.id]
        self._assign(req, best)
        return True

    def _match_ask(self, ask: WorkAsk) -> None:
        for i, (_, req) in enumerate(self.waiting):
            if req.price_nfil >= ask.price_nfil and ask.provider not in req.failed_by:
                del self.waiting[i]
                del self.accounts[ask.provider].asks[ask.id]
                self._assign(req, ask)
                return

    def _assign(self, req: WorkRequest, ask: WorkAsk) -> None:
        acc = self.accounts[ask.provider]
        req.state, req.provider, req.ask_id = "assigned", ask.provider, ask.id
        req.assigned_at = self.sched.now
        req.attempts += 1
        acc.assigned[req.id] = req
        if not req.challenge:
            self.counts["assigned"] += 1
            self.counts["retries"] += req.attempts > 1
        attempt = req.attempts
        self.sched.after(DEADLINE_S, lambda: self._deadline(req, attempt))
        if self.assigned_hook is not None:
            self.assigned_hook(req)

    def _deadline(self, req: WorkRequest, attempt: int) -> None:
        if req.state != "assigned" or req.attempts != attempt or req.provider is None:
            return
        acc = self.accounts[req.provider]
        del acc.assigned[req.id]
        if req.challenge:
            req.state = "expired"
            return
        acc.challenges = max(0, acc.challenges - PENALTY_CHALLENGES)
        acc.penalties += 1
        self.counts["penalties"] += 1
        req.failed_by.add(acc.wallet)
        self._trim(acc)
        if not self._match_request(req):
            self._wait(req)

    def _trim(self, acc: Account) -> None:
        """Close the newest open asks the provider's slots no longer cover."""
        while acc.asks and acc.used > acc.slots:
            del acc.asks[max(acc.asks)]
