"""What a reading means for the business: slots, revenue, cost, profit, loss.

`assess` makes the point the monitor keeps (`MarketPoint`) from the
reading, the ledger (fleet_agent/market/ledger.py), the fleet as the
monitor saw it (`MarketStepRequest`), the previous point and the point
about an hour before. Per hour means over the last hour:

- **Slots**: the ledger's balance // 50 (`slots_total`); in use, the open
  asks and the paid rows not yet submitted (`slots_used`: a challenge proof
  holds none, it is what an ask gets when there is no free slot). Curio
  learns a row is a challenge proof only when it submits it (``was_pow`` is
  set by tasks/proofshare/task_submit.go), so an open row counts as paid
  work up to the slots there are, and the rest as challenge proofs: the
  market assigns paid work only to an open ask, which holds a slot.
- **Revenue**: the growth of every voucher's cumulative amount (the
  payments summary) since the point about an hour before (the oldest point
  of the first hour), per hour of the time between them. A total that
  fell (the node's payments table was reset) is no revenue, never a
  negative one; until the hour's base is past the fall, the revenue reads
  0. Under `MIN_WINDOW` of history there is no measure: the previous
  point's figures stand, and no loss starts.
- **Paid proofs per hour**: the ledger's paid rows over the same window
  (a lower bound: the ledger misses rows at high rates).
- **FIL in dollars**: the operator's `fil_usd` wins; else the worker's
  FLEET_FIL_USD_URL as read; else none, and no dollar figure.
- **Cost per hour**: the fleet's rental as the monitor passes it
  (`rental_usd_per_h`: the fleet snapshot's $/h, vast.ai's ``dph_total``
  per machine, which holds the GPU and the disk; downloads, billed per GB,
  are *not* in it, nor is anything the operator pays outside vast.ai, the
  Curio node itself included) plus the LLM: what the agent's runs that
  started in the last hour cost (the store's run costs).
- **Loss**: revenue per paid proof under cost per paid proof, which over
  the same proofs is revenue per hour under cost per hour (when FIL has a
  dollar price and there was revenue); or no revenue at all while the
  fleet costs and the node asks for work. `loss_since` carries from point
  to point and clears when it pays again; once it has lasted the policy's
  `loss_minutes`, the result carries a `loss_alert` on every reading until
  it clears (the monitor decides what to do with it: `market_on_loss`).
- **Note**: when the fleet has more GPUs than slots, how many challenge
  proofs the missing slots need, and what proving them costs at the
  fleet's $ per GPU-hour.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from datetime import timedelta

from fleet_agent.wire import MAX_FLOAT

from .point import (
    CHALLENGES_PER_SLOT,
    MAX_NFIL,
    ChallengeLedger,
    MarketPoint,
    MarketReading,
    MarketStepRequest,
    MarketStepResult,
)

__all__ = ["MIN_WINDOW", "assess", "loss_alert", "slots_note"]

#: Less history than this measures no rate (one payment in a minute is not 60 an hour).
MIN_WINDOW = timedelta(minutes=10)
_NOTE_CHARS = 600


def _clamp(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def slots_note(gpus: int, ledger: ChallengeLedger, capacity_per_h: float, rental: float) -> str:
    """What the slots the fleet lacks cost to earn, or "" when it lacks none."""
    slots = ledger.slots
    if gpus <= slots:
        return ""
    more = gpus - slots
    need = CHALLENGES_PER_SLOT * gpus - ledger.challenges
    text = (
        f"{gpus} GPUs, {slots} slots: {more} more slot(s) need {need} challenge proofs "
        f"(earned while asks find no free slot)"
    )
    if capacity_per_h > 0:
        hours = need * gpus / capacity_per_h
        text += f", about {hours:.1f} GPU-hours"
        if rental > 0:
            text += (
                f" ≈ ${need * rental / capacity_per_h:.2f} at the fleet's "
                f"${rental / gpus:.2f}/GPU-h"
            )
    return text[:_NOTE_CHARS]


def assess(
    reading: MarketReading,
    ledger: ChallengeLedger,
    req: MarketStepRequest,
    prev: MarketPoint | None,
    hour_ago: MarketPoint | None,
    llm_usd_per_h: float = 0.0,
) -> MarketStepResult:
    """The point for `reading` and, when a loss has lasted, its alert.
    `hour_ago` is the last point at or before an hour ago (or the oldest
    since, in the first hour); `prev` the last point."""
    at = reading.as_of
    policy = req.policy
    open_rows = reading.open_rows
    pow_open = sum(1 for r in open_rows if r.was_pow)
    measured = hour_ago is not None and at - hour_ago.at >= MIN_WINDOW
    if hour_ago is not None and measured:
        hours = (at - hour_ago.at).total_seconds() / 3600
        grown = max(0, reading.paid_total_nfil - hour_ago.paid_total_nfil)
        # A float past MAX_FLOAT (1e15 nFIL/h: a million FIL) is no Wire value.
        revenue = _clamp(grown / hours, 0.0, min(float(MAX_NFIL), MAX_FLOAT))
        proofs = max(0, ledger.paid_proofs_total - hour_ago.ledger.paid_proofs_total)
        paid_per_h = _clamp(proofs / hours, 0.0, 1e7)
    else:
        revenue = prev.revenue_nfil_per_h if prev is not None else 0.0
        paid_per_h = prev.paid_proofs_per_h if prev is not None else 0.0
    if policy.fil_usd > 0:
        fil_usd, source = policy.fil_usd, "config"
    elif reading.fil_usd is not None:
        fil_usd, source = reading.fil_usd, "url"
    else:
        fil_usd, source = None, "none"
    revenue_usd = None if fil_usd is None else _clamp(revenue / 1e9 * fil_usd, 0.0, 1e9)
    rental = req.rental_usd_per_h
    llm = _clamp(llm_usd_per_h, 0.0, 1e6)
    cost = rental + llm
    profit = None if revenue_usd is None else _clamp(revenue_usd - cost, -1e7, 1e9)
    losing = cost > 0 and (
        (revenue > 0 and revenue_usd is not None and revenue_usd < cost)
        or (revenue == 0 and reading.enabled)
    )
    if measured:
        since = ((prev.loss_since if prev is not None else None) or at) if losing else None
    else:
        since = prev.loss_since if prev is not None else None
    point = MarketPoint(
        at=at,
        enabled=reading.enabled,
        price_nfil=reading.price_nfil,
        market_price_nfil=reading.market_price_nfil,
        asks_open=reading.asks_open,
        rows_open=len(open_rows),
        pow_open=pow_open,
        queued=reading.queue_count or 0,
        ledger=ledger,
        slots_total=ledger.slots,
        slots_used=max(
            reading.asks_open,
            min(reading.asks_open + len(open_rows) - pow_open, ledger.slots),
        ),
        gpus=req.gpus,
        gpus_proving=min(req.gpus_proving, req.gpus),
        paid_total_nfil=reading.paid_total_nfil,
        paid_proofs_per_h=paid_per_h,
        revenue_nfil_per_h=revenue,
        fil_usd=fil_usd,
        fil_usd_source=source,
        revenue_usd_per_h=revenue_usd,
        rental_usd_per_h=rental,
        llm_usd_per_h=llm,
        cost_usd_per_h=cost,
        profit_usd_per_h=profit,
        loss_since=since,
        withdrawals_last_hour=max(
            0,
            ledger.withdrawals_total
            - (hour_ago.ledger.withdrawals_total if hour_ago is not None else 0),
        ),
        note=slots_note(req.gpus, ledger, req.capacity_per_h, rental),
    )
    alert = loss_alert(point, policy.loss_minutes, policy.on_loss)
    return MarketStepResult(point=point, loss_alert=alert)


def loss_alert(point: MarketPoint, loss_minutes: float, on_loss: str) -> str:
    """The line the monitor tells the agent once a loss has lasted `loss_minutes`, else ""."""
    if point.loss_since is None:
        return ""
    lasted = (point.at - point.loss_since).total_seconds() / 60
    if lasted < loss_minutes:
        return ""
    if point.profit_usd_per_h is not None:
        by = f"losing ${-point.profit_usd_per_h:.2f}/h"
        earned = f"revenue ${point.revenue_usd_per_h or 0:.2f}/h"
    else:
        by = f"losing up to ${point.cost_usd_per_h:.2f}/h"
        earned = "no revenue"
    return (
        f"market: proving at a loss since {point.loss_since:%Y-%m-%d %H:%M} UTC "
        f"({lasted:.0f} min): {earned} against cost ${point.cost_usd_per_h:.2f}/h, {by} "
        f"(market_on_loss={on_loss})"
    )[:600]
