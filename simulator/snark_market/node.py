"""The operator's Curio node on the market: the proofshare tasks and tables.

Touches its own tables (dataclass rows standing for Curio's), the
`MarketService` (as Curio's provictl.go client would) and its `Prover`, on
the `Scheduler`'s time. Each rule is Curio's (filecoin-project/curio,
tasks/proofshare/; config.NodeConfig has the numbers):

- **proofshare_meta** (harmony/harmonydb/sql/20250115-proofshare.sql): one
  row, ``enabled`` false, ``wallet`` NULL, ``pprice`` '0' attoFIL,
  ``request_task_id`` NULL, ``autosettle`` true (20250724).
- **Request** (task_request.go): every 3 s the Adder first asks the hold
  rule (`hold`: the operator's own sealing waits; request_harmony.go), then
  does nothing unless enabled, a wallet is set and no request task exists
  (one cluster-wide). It counts the rows waiting for a machine (not
  computed, and no task or an unowned one) into the ``queue_count`` gauge
  and schedules the task only while at most 5 wait. The task recounts,
  wants ``8 - waiting`` rows and loops: poll the service; insert each
  assigned request whose ask is not yet a row being worked on; open
  ``wanted - active asks`` new asks at ``pprice``; end when it wants no
  more and has no active ask; else poll again after 3 s (doubling to
  2 min after a 429). Disabling does not stop a running loop. A service
  error fails the task, which runs again 10 s later.
- **Prove** (task_prove.go): every 10 s one row without a task gets one;
  a machine with room takes the oldest task (``CanAccept`` orders by
  ``obtained_at``) and the row's proof goes to the `Prover`; a failed
  attempt is retried after 10 s x retries, and after 20 failures the task
  is gone and the 5-minute cleanup gives the row back to the Adder. Rows
  submitted more than 2 days ago are deleted by the same cleanup.
- **Submit** (task_submit.go): every 10 s each computed row is answered at
  the service: *gone* (410) deletes the row; otherwise it is submitted,
  ``was_pow`` set, and a paid answer's voucher stored as a payment row
  (proofshare_provider_payments).
- **Autosettle** (task_autosettle.go): every 2 min, the latest voucher is
  redeemed when the unsettled amount exceeds base fee x 50M gas x 1.2 x 500;
  the settlement row (proofshare_provider_payments_settlement) is written
  and the gas paid is counted.

Harmony's own polling delays (a task waits up to its poller's next turn)
are not modelled: a task is taken the moment it can be. The node submits in
the tick's instant, so ``submit_task_id`` is never seen set.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from .cids import message_cid
from .config import NodeConfig, ProofKind
from .events import Scheduler
from .prover import ProofJob, Prover
from .service import MarketService, ServiceError

__all__ = ["Meta", "Payment", "ProofshareNode", "QueueRow", "Settlement"]


@dataclass(slots=True)
class Meta:
    """proofshare_meta's one row."""

    enabled: bool = False
    wallet: str | None = None
    request_task_id: int | None = None
    pprice_atto: int = 0
    autosettle: bool = True


@dataclass(slots=True)
class QueueRow:
    """A proofshare_queue row, and what harmony_task knows of its task."""

    service_id: int
    obtained_at: float
    request_cid: str
    kind: ProofKind
    compute_task_id: int | None = None
    #: harmony_task.owner_id is set: a machine runs the task.
    owned: bool = False
    compute_done: bool = False
    submit_task_id: int | None = None
    submit_done: bool = False
    was_pow: bool = False
    retries: int = 0
    #: Not before (harmony's RetryWait after a failed attempt).
    ready_at: float = 0.0
    #: The task was dropped after MaxFailures: cleanup clears compute_task_id.
    task_gone: bool = False

    @property
    def waiting(self) -> bool:
        """What task_request.go counts: not computed, no task or an unowned one."""
        return not self.compute_done and (self.compute_task_id is None or not self.owned)


@dataclass(frozen=True, slots=True)
class Payment:
    """A proofshare_provider_payments row."""

    provider_id: int
    request_cid: str
    nonce: int
    cumulative_atto: int
    created_at: float


@dataclass(frozen=True, slots=True)
class Settlement:
    """A proofshare_provider_payments_settlement row (with the amount it redeemed)."""

    provider_id: int
    nonce: int
    settled_at: float
    message_cid: str
    cumulative_atto: int


@dataclass(slots=True)
class NodeCounters:
    """The node's ``curio_psvc_proofshare_*`` figures (tasks/proofshare/metrics.go)."""

    queue_count: float = 0.0
    adder_commits: int = 0
    hold: dict[str, int] = field(default_factory=dict)
    need_asks: float = 0.0
    to_request_remaining: float = 0.0
    #: ``newly_added_total``: asks created (recorded after CreateWorkAsk).
    asks_created: int = 0
    #: Not Curio metrics: what the model counts besides.
    inserted: int = 0
    submitted: int = 0
    challenges_done: int = 0
    gone: int = 0
    request_errors: int = 0
    prove_failures: int = 0
    settle_fees_atto: int = 0


class ProofshareNode:
    """The node (module doc); `rows` in insertion order stand for the table."""

    def __init__(
        self, sched: Scheduler, service: MarketService, prover: Prover, config: NodeConfig
    ) -> None:
        self.sched = sched
        self.service = service
        self.prover = prover
        self.config = config
        self.meta = Meta()
        #: ShouldHoldProofShare's answer (request_harmony.go): local priority work waits.
        self.hold = False
        self.rows: list[QueueRow] = []
        self.payments: list[Payment] = []
        self.settlements: list[Settlement] = []
        self.counters = NodeCounters()
        self._task_ids = itertools.count(1)
        self._loop: _RequestLoop | None = None
        self._last_insert, self._same_instant = -1.0, 0
        prover.attach(sched, self._proof_done)
        c = config
        sched.every(c.request_poll_s, self._request_adder)
        sched.every(c.prove_adder_s, self._prove_adder)
        sched.every(c.submit_s, self._submit_tick)
        sched.every(c.cleanup_s, self._cleanup)
        sched.every(c.autosettle_s, self._autosettle)

    # --------------------------------------------------------------- meta

    def set_meta(self, enabled: bool, wallet: str, pprice_atto: int) -> None:
        """PSSetMeta's UPDATE (the RPC layer parsed and resolved the values)."""
        self.meta.enabled, self.meta.wallet, self.meta.pprice_atto = enabled, wallet, pprice_atto

    def queue_count(self) -> int:
        return sum(1 for r in self.rows if r.waiting)

    def provider_id(self) -> int | None:
        """The wallet's actor id (StateLookupID), None without a wallet."""
        wallet = self.meta.wallet
        return None if wallet is None else self.service.account(wallet).provider_id

    # ------------------------------------------------------------ request

    def _request_adder(self) -> None:
        c = self.counters
        decision = "hold" if self.hold else "pass"
        c.hold[decision] = c.hold.get(decision, 0) + 1
        meta = self.meta
        if self.hold or not meta.enabled or meta.wallet is None or meta.request_task_id is not None:
            return
        waiting = self.queue_count()
        c.queue_count = waiting
        if waiting > self.config.low_water:
            return
        meta.request_task_id = next(self._task_ids)
        c.adder_commits += 1
        self._request_do()

    def _request_do(self) -> None:
        to_request = self.config.high_water - self.queue_count()
        self.counters.to_request_remaining = to_request
        if to_request <= 0:
            self.meta.request_task_id = None
            return
        self._loop = _RequestLoop(to_request, self.config.request_poll_s)
        self._request_poll()

    def _request_poll(self) -> None:
        loop, wallet = self._loop, self.meta.wallet
        if loop is None or wallet is None:
            return
        c = self.counters
        work = self.service.poll_work(wallet)
        working = {r.service_id for r in self.rows if not r.submit_done}
        added = 0
        for req in work.requests:
            if req.ask_id is not None and req.ask_id not in working:
                self._insert(req.ask_id, req.cid)
                added += 1
        loop.to_request -= added
        need = loop.to_request - len(work.active_asks)
        c.need_asks = need
        created, limited = 0, False
        for _ in range(max(0, need)):
            try:
                self.service.create_ask(wallet, self.meta.pprice_atto)
            except ServiceError as exc:
                if exc.status == 429:
                    limited = True
                    break
                # Do returns the error: harmony runs the task again after RetryWait.
                c.request_errors += 1
                self._loop = None
                self.sched.after(self.config.request_retry_s, self._request_do)
                return
            created += 1
            c.asks_created += 1
        if loop.to_request <= 0 and not work.active_asks and not limited:
            self._loop = None
            self.meta.request_task_id = None
            return
        if added or created:
            loop.backoff = self.config.request_poll_s
        elif limited:
            loop.backoff = min(loop.backoff * 2, self.config.max_poll_backoff_s)
        c.to_request_remaining = loop.to_request
        self.sched.after(loop.backoff, self._request_poll)

    def _insert(self, service_id: int, cid: str) -> None:
        self.counters.inserted += 1
        kind = self.service.proof_kind(cid)
        # NOW() of each INSERT: a microsecond apart within one poll, as
        # separate statements are, so newest-first is well defined.
        now = self.sched.now
        self._same_instant = self._same_instant + 1 if now == self._last_insert else 0
        self._last_insert = now
        obtained = now + self._same_instant * 1e-6
        for row in self.rows:
            if row.request_cid == cid:  # ON CONFLICT (request_cid) DO UPDATE
                row.service_id, row.obtained_at = service_id, obtained
                row.compute_done = row.submit_done = False
                return
        self.rows.append(QueueRow(service_id, obtained, cid, kind))

    # -------------------------------------------------------------- prove

    def _prove_adder(self) -> None:
        row = next((r for r in self.rows if not r.compute_done and r.compute_task_id is None), None)
        if row is not None:
            row.compute_task_id = next(self._task_ids)
            row.owned, row.retries, row.ready_at = False, 0, 0.0
        self.dispatch()

    def dispatch(self) -> None:
        """Machines with room take the oldest tasks that are ready."""
        now = self.sched.now
        while self.prover.free() > 0:
            ready = [
                r
                for r in self.rows
                if r.compute_task_id is not None
                and not r.owned
                and not r.compute_done
                and not r.task_gone
                and r.ready_at <= now
            ]
            if not ready:
                return
            row = min(ready, key=lambda r: r.obtained_at)
            row.owned = True
            assert row.compute_task_id is not None
            self.prover.start(ProofJob(row.request_cid, row.kind, row.compute_task_id, row.retries))

    def _proof_done(self, job: ProofJob, ok: bool) -> None:
        row = next((r for r in self.rows if r.compute_task_id == job.task_id and r.owned), None)
        if row is not None:
            row.owned = False
            if ok:
                row.compute_done, row.compute_task_id = True, None
            else:
                self.counters.prove_failures += 1
                row.retries += 1
                if row.retries >= self.config.prove_max_failures:
                    row.task_gone = True
                else:
                    row.ready_at = self.sched.now + self.config.prove_retry_s * row.retries
                    self.sched.at(row.ready_at, self.dispatch)
        self.dispatch()

    # ------------------------------------------------------------- submit

    def _submit_tick(self) -> None:
        wallet = self.meta.wallet
        if wallet is None:
            return
        c = self.counters
        for row in [r for r in self.rows if r.compute_done and not r.submit_done]:
            reward = self.service.respond_work(wallet, row.request_cid)
            if reward is None:  # 410: reassigned to another provider
                self.rows.remove(row)
                c.gone += 1
                continue
            row.submit_done, row.was_pow = True, reward.pow
            c.submitted += 1
            if reward.pow:
                c.challenges_done += 1
                continue
            pid = self.service.account(wallet).provider_id
            self.payments.append(
                Payment(pid, row.request_cid, reward.nonce, reward.cumulative_atto, self.sched.now)
            )

    # ------------------------------------------------------------ cleanup

    def _cleanup(self) -> None:
        for row in self.rows:
            if row.task_gone and not row.compute_done:
                row.task_gone, row.compute_task_id, row.owned = False, None, False
        horizon = self.sched.now - self.config.keep_submitted_s
        self.rows = [r for r in self.rows if not (r.submit_done and r.obtained_at < horizon)]

    # ------------------------------------------------------------- settle

    def network_fee_atto(self) -> int:
        """ParentBaseFee x SettleGas x 1.2 (task_autosettle.go)."""
        return self.config.base_fee_atto * self.config.settle_gas * 12 // 10

    def unsettled_atto(self) -> int:
        latest = self.payments[-1].cumulative_atto if self.payments else 0
        settled = self.settlements[-1].cumulative_atto if self.settlements else 0
        return max(0, latest - settled)

    def _autosettle(self) -> None:
        if not self.meta.autosettle or not self.payments:
            return
        latest = max(self.payments, key=lambda p: p.nonce)
        last_nonce = self.settlements[-1].nonce if self.settlements else 0
        fee = self.network_fee_atto()
        if latest.nonce <= last_nonce or self.unsettled_atto() <= fee * 500:
            return
        self.service.redeem(latest.provider_id, latest.cumulative_atto, latest.nonce)
        cid = message_cid(f"settle:{latest.provider_id}:{latest.nonce}")
        pid, nonce = latest.provider_id, latest.nonce
        self.settlements.append(Settlement(pid, nonce, self.sched.now, cid, latest.cumulative_atto))
        self.counters.settle_fees_atto += fee


@dataclass(slots=True)
class _RequestLoop:
    """The running request task's own variables (Do's locals)."""

    to_request: int
    backoff: float
