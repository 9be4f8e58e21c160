"""The provider's business on the Snark Market, as the agent keeps it: one
reading of the operator's Curio node (`MarketReading`), the challenge ledger
the agent keeps across readings (`ChallengeLedger`: the market does not
publish a provider's balance), and the point the monitor stores per reading
(`MarketPoint`): slots, prices, revenue, cost and profit per hour.

Sources of every shape: docs/SIMULATOR.md, "The Snark Market", which cites
Curio's files (web/api/webrpcporep/proofshare.go, tasks/proofshare/,
lib/proofsvc/). Amounts are whole nFIL (10^-9 FIL): Curio's ask prices are
whole nFIL (`min_price_nfil`), and 2^53 nFIL is 9 million FIL, which bounds
every total a provider holds. Pure models: no I/O.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Literal

from pydantic import ConfigDict, Field

from fleet_agent.wire import Wire

__all__ = [
    "CHALLENGES_PER_SLOT",
    "MAX_IDS",
    "MAX_NFIL",
    "MAX_PRICE_NFIL",
    "PENALTY_CHALLENGES",
    "WITHDRAW_CHALLENGES",
    "ChallengeLedger",
    "MarketLeverResult",
    "MarketPoint",
    "MarketPolicy",
    "MarketReading",
    "MarketStepRequest",
    "MarketStepResult",
    "PriceChange",
    "QueueRow",
    "RequestsChange",
    "data_line",
]

#: Curio documentation/en/experimental-features/Snark-Market.md: "Number of
#: work slots is calculated by dividing completed challenge proofs by 50".
CHALLENGES_PER_SLOT = 50
#: A late proof costs this many challenge proofs (the same doc).
PENALTY_CHALLENGES = 50
#: Withdrawing an ask costs one (the same doc).
WITHDRAW_CHALLENGES = 1
#: 1 FIL in nFIL: Curio's `common/types.go` caps an ask's price there.
MAX_PRICE_NFIL = 10**9
#: Any amount of nFIL the agent holds (2^53 - 1 is 9.007 million FIL).
MAX_NFIL = 2**53 - 1
_MAX_ROWS = 1000
_MAX_IDS = 400
#: Row ids the ledger keeps per kind (the newest).
MAX_IDS = _MAX_IDS


class _Model(Wire):
    model_config = ConfigDict(extra="forbid", frozen=True)


class QueueRow(_Model):
    """A `PSListQueue` row (the 15 newest of the node's `proofshare_queue`)."""

    service_id: str = Field(min_length=1, max_length=128)
    obtained_at: datetime
    computed: bool = False
    submitted: bool = False
    was_pow: bool = False
    #: The row's payment once submitted and paid (None: none yet, or "n/a").
    payment_nfil: int | None = Field(None, ge=0, le=MAX_NFIL)


class MarketReading(_Model):
    """What the node and the market said at `as_of`, each field checked at
    the edge (fleet_agent/market/parse.py)."""

    as_of: datetime
    #: PSGetMeta: requests on, the wallet (`""`: none) and the ask price.
    enabled: bool
    wallet: str = Field("", max_length=120)
    price_nfil: int = Field(ge=0, le=MAX_PRICE_NFIL)
    #: PSListAsks: the wallet's open asks and the lowest price among them.
    asks_open: int = Field(0, ge=0, le=_MAX_ROWS)
    asks_min_price_nfil: int | None = Field(None, ge=0, le=MAX_PRICE_NFIL)
    #: PSListQueue: newest first, at most 15 from Curio.
    rows: list[QueueRow] = Field(default_factory=list, max_length=_MAX_ROWS)
    #: /debug/metrics: rows waiting for a machine (None: not served).
    queue_count: int | None = Field(None, ge=0, le=10**7)
    #: PSProviderLastPaymentsSummary: every voucher's cumulative amount,
    #: settled or not, summed over the node's wallets.
    paid_total_nfil: int = Field(0, ge=0, le=MAX_NFIL)
    #: The market service's current price (`/client/current-price`,
    #: lib/proofsvc/clientctl.go `PriceResponse.price_nfil`); None: not read.
    market_price_nfil: int | None = Field(None, ge=1, le=MAX_PRICE_NFIL)
    #: FIL in dollars from the worker's price URL (None: not read).
    fil_usd: float | None = Field(None, gt=0, le=100_000)

    @property
    def open_rows(self) -> list[QueueRow]:
        """Rows not yet submitted: they hold a slot (paid work) or earn one (pow)."""
        return [r for r in self.rows if not r.submitted]


class ChallengeLedger(_Model):
    """The challenge balance as the agent counts it: the balance the
    operator last gave (`based_on`, AgentConfig.market_challenges) plus the
    challenge proofs seen done, less a penalty per row seen late and one per
    ask the agent withdrew. Ids are kept (the newest `_MAX_IDS`) so a row
    seen in many readings counts once."""

    based_on: int = Field(0, ge=0, le=10**9)
    challenges: int = Field(0, ge=0, le=10**9)
    pow_done_total: int = Field(0, ge=0, le=10**9)
    penalties_total: int = Field(0, ge=0, le=10**9)
    withdrawals_total: int = Field(0, ge=0, le=10**9)
    paid_proofs_total: int = Field(0, ge=0, le=10**12)
    pow_ids: list[str] = Field(default_factory=list, max_length=_MAX_IDS)
    late_ids: list[str] = Field(default_factory=list, max_length=_MAX_IDS)
    paid_ids: list[str] = Field(default_factory=list, max_length=_MAX_IDS)

    @property
    def slots(self) -> int:
        return self.challenges // CHALLENGES_PER_SLOT


class MarketPolicy(_Model):
    """The operator's settings for the business (AgentConfig.market_*)."""

    #: The challenge balance the operator read on the market's dashboard.
    challenges: int = Field(0, ge=0, le=10**9)
    #: Dollars per FIL as configured (0: the worker's price URL, else none).
    fil_usd: float = Field(0.0, ge=0, le=100_000)
    #: The range the agent may set its ask price in (max 0: it may not).
    min_price_nfil: int = Field(0, ge=0, le=MAX_PRICE_NFIL)
    max_price_nfil: int = Field(0, ge=0, le=MAX_PRICE_NFIL)
    #: Asks the agent may withdraw in any hour (1 challenge proof each).
    max_withdrawals_per_hour: int = Field(4, ge=0, le=1_000)
    #: Revenue per proof under cost per proof this long is a loss ...
    loss_minutes: float = Field(60.0, ge=1, le=10_080)
    #: ... and then the agent notifies, and lowers the fleet or stops asking.
    on_loss: Literal["notify", "lower", "stop"] = "notify"


class MarketStepRequest(_Model):
    """`observe_market`: read the node, count, price, keep, for one agent."""

    agent_id: str
    policy: MarketPolicy
    #: The fleet as the monitor's poll saw it.
    gpus: int = Field(0, ge=0, le=100_000)
    #: Of them, the GPUs of machines that prove now (not loading).
    gpus_proving: int = Field(0, ge=0, le=100_000)
    capacity_per_h: float = Field(0.0, ge=0, le=10**7)
    rental_usd_per_h: float = Field(0.0, ge=0, le=10**6)


class MarketPoint(_Model):
    """One reading and what the agent made of it (per hour: the last hour)."""

    at: datetime
    enabled: bool = False
    price_nfil: int = Field(0, ge=0, le=MAX_PRICE_NFIL)
    market_price_nfil: int | None = Field(None, ge=1, le=MAX_PRICE_NFIL)
    asks_open: int = Field(0, ge=0, le=_MAX_ROWS)
    #: Rows not submitted (paid work and challenge proofs) and, of them,
    #: the challenge proofs known as such (Curio sets ``was_pow`` when it
    #: submits, so with Curio this is 0); `queued` waits for a machine (the metric).
    rows_open: int = Field(0, ge=0, le=_MAX_ROWS)
    pow_open: int = Field(0, ge=0, le=_MAX_ROWS)
    queued: int = Field(0, ge=0, le=10**7)
    ledger: ChallengeLedger = Field(default_factory=ChallengeLedger)
    slots_total: int = Field(0, ge=0, le=10**8)
    slots_used: int = Field(0, ge=0, le=10**8)
    gpus: int = Field(0, ge=0, le=100_000)
    gpus_proving: int = Field(0, ge=0, le=100_000)
    paid_total_nfil: int = Field(0, ge=0, le=MAX_NFIL)
    paid_proofs_per_h: float = Field(0.0, ge=0, le=10**7)
    revenue_nfil_per_h: float = Field(0.0, ge=0, le=float(MAX_NFIL))
    fil_usd: float | None = Field(None, gt=0, le=100_000)
    fil_usd_source: Literal["config", "url", "none"] = "none"
    revenue_usd_per_h: float | None = Field(None, ge=0, le=10**9)
    rental_usd_per_h: float = Field(0.0, ge=0, le=10**6)
    llm_usd_per_h: float = Field(0.0, ge=0, le=10**6)
    cost_usd_per_h: float = Field(0.0, ge=0, le=10**7)
    profit_usd_per_h: float | None = Field(None, ge=-(10**7), le=10**9)
    #: Since when revenue per proof has stayed under cost per proof (None: it has not).
    loss_since: datetime | None = None
    #: Asks withdrawn in the hour before `at` (the levers' hourly cap counts them).
    withdrawals_last_hour: int = Field(0, ge=0, le=10**6)
    #: One line a person reads: what the point says and what to do.
    note: str = Field("", max_length=600)

    def line(self) -> str:
        """One line for `status`, the console and the model's context."""
        fil = f"{self.revenue_nfil_per_h / 1e9:.4f} FIL/h"
        usd = f" (${self.revenue_usd_per_h:.2f}/h)" if self.revenue_usd_per_h is not None else ""
        profit = (
            f"profit ${self.profit_usd_per_h:+.2f}/h"
            if self.profit_usd_per_h is not None
            else "profit n/a (no FIL price)"
        )
        market = (
            f"{self.market_price_nfil / 1e9:g}" if self.market_price_nfil is not None else "n/a"
        )
        asking = "on" if self.enabled else "off"
        return (
            f"slots {self.slots_used}/{self.slots_total} ({self.ledger.challenges} challenges), "
            f"price {self.price_nfil / 1e9:g} FIL/P (market {market}), requests {asking}, "
            f"queue {self.queued} waiting / {self.rows_open} open, revenue {fil}{usd}, "
            f"cost ${self.cost_usd_per_h:.2f}/h, {profit}"
        )


def data_line(point: MarketPoint, policy: MarketPolicy) -> str:
    """The point as one line of JSON for the run's context (`Market data: {...}`):
    what the autopilot's rules read (fleet_agent/autopilot/market.py), and the
    model may."""
    data = {
        "enabled": point.enabled,
        "price_nfil": point.price_nfil,
        "market_price_nfil": point.market_price_nfil,
        "asks_open": point.asks_open,
        "rows_open": point.rows_open,
        "queued": point.queued,
        "gpus": point.gpus,
        "gpus_proving": point.gpus_proving,
        "slots_total": point.slots_total,
        "slots_used": point.slots_used,
        "challenges": point.ledger.challenges,
        "loss": point.loss_since is not None,
        "min_price_nfil": policy.min_price_nfil,
        "max_price_nfil": policy.max_price_nfil,
        "withdrawals_left": max(0, policy.max_withdrawals_per_hour - point.withdrawals_last_hour),
    }
    return "Market data: " + json.dumps(data, separators=(",", ":"))


class MarketStepResult(_Model):
    """The point, or why there is none (the node unreadable: nothing changes)."""

    refusal: str = Field("", max_length=300)
    point: MarketPoint | None = None
    #: Set when the loss has lasted `loss_minutes`: what the monitor tells the agent.
    loss_alert: str = Field("", max_length=600)

    @property
    def summary(self) -> str:
        if self.point is None:
            return f"market: no reading: {self.refusal}"
        return f"market: {self.point.line()}"


class PriceChange(_Model):
    """`set_ask_price`: the node's ask price; `reprice_open` also withdraws
    the open asks (1 challenge proof each) so new ones take the price."""

    agent_id: str = ""
    price_nfil: int = Field(ge=1, le=MAX_PRICE_NFIL)
    reprice_open: bool = False
    reason: str = Field("", max_length=600)
    policy: MarketPolicy


class RequestsChange(_Model):
    """`set_requests`: the node asks the market for work, or stops asking.
    Off also withdraws open asks when `withdraw_open` (1 challenge each):
    PSSetMeta(enabled=false) starts no request task but leaves open asks."""

    agent_id: str = ""
    enabled: bool
    withdraw_open: bool = False
    reason: str = Field("", max_length=600)
    policy: MarketPolicy


class MarketLeverResult(_Model):
    """What a lever did, or why it was refused (nothing changed then)."""

    ok: bool
    refused: str = Field("", max_length=600)
    withdrawn: int = Field(0, ge=0, le=_MAX_ROWS)
    challenges_spent: int = Field(0, ge=0, le=_MAX_ROWS)
    summary: str = Field("", max_length=600)
