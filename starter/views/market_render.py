"""The business on the Snark Market as text: the `market` block of
`fleet-agent status` and the console's status card (`market_rows`), and the
line under `fleet-agent fleet`'s table (`market_summary`).

Pure functions of a `MarketPoint` (fleet_agent/market/point.py, as the
store's latest: starter/views/market.py) and `now`. The callers show nothing
with the market off, so those views read as they did before market mode.
starter/views/render.py imports this module: it imports nothing of starter's.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from fleet_agent.market.point import MarketPoint
from fleet_agent.untrusted import single_line

__all__ = ["STALE_AFTER", "fil", "market_rows", "market_summary", "point_age"]

#: A point older than this is flagged: the monitor reads the node every poll
#: (30 s by default), as the fleet's snapshot (starter/views/fleet.py).
STALE_AFTER = timedelta(minutes=5)
#: The point's note as a person reads it: ours, but one line and bounded.
_NOTE_CHARS = 300


def fil(nfil: float) -> str:
    """nFIL as FIL without float noise: 5000000 → `0.005`, 123456789 → `0.123456789`."""
    return f"{nfil / 1e9:.9f}".rstrip("0").rstrip(".")


def _minutes(since: datetime, now: datetime) -> int:
    return max(0, round((now - since).total_seconds() / 60))


def point_age(point: MarketPoint, now: datetime) -> str:
    """`as of 11:58Z (2 min ago)`, with a warning once it is stale."""
    text = f"as of {point.at:%H:%M}Z ({_minutes(point.at, now)} min ago)"
    if now - point.at > STALE_AFTER:
        text += " — STALE: the monitor has not read the node since; is the worker running?"
    return text


def _market_price(point: MarketPoint) -> str:
    if point.market_price_nfil is None:
        return "n/a"
    return f"{fil(point.market_price_nfil)} FIL/proof"


def _profit(point: MarketPoint) -> str:
    if point.profit_usd_per_h is None:
        return "n/a (no FIL price: set fil_usd, or the worker's price URL)"
    return f"${point.profit_usd_per_h:+.2f}/h"


def _revenue(point: MarketPoint) -> str:
    text = f"{point.revenue_nfil_per_h / 1e9:.4f} FIL/h"
    if point.revenue_usd_per_h is not None and point.fil_usd is not None:
        price = f"FIL ${point.fil_usd:g}, {point.fil_usd_source}"
        text += f" · ${point.revenue_usd_per_h:.2f}/h ({price})"
    return text + f" · {point.paid_proofs_per_h:g} paid proofs/h"


def market_rows(point: MarketPoint | None, now: datetime) -> list[tuple[str, str]]:
    """(key, text) rows: `market` first (the point's age, or that there is
    none yet), then slots, price, requests, queue, revenue, cost, profit, the
    loss (while there is one) and the note."""
    if point is None:
        return [("market", "no reading yet (the monitor keeps one per poll)")]
    over = (
        f" — OVER: {point.gpus} GPUs rented for {point.slots_total} slots"
        if point.gpus > point.slots_total
        else ""
    )
    rows = [
        ("market", point_age(point, now)),
        (
            "slots",
            f"{point.slots_used} of {point.slots_total} used · {point.gpus} GPUs · "
            f"{point.ledger.challenges} challenges{over}",
        ),
        ("price", f"ask {fil(point.price_nfil)} FIL/proof · market {_market_price(point)}"),
        ("requests", f"{'on' if point.enabled else 'off'} · {point.asks_open} asks open"),
        (
            "queue",
            f"{point.queued} waiting / {point.rows_open} open rows "
            f"({point.pow_open} challenge proofs)",
        ),
        ("revenue", _revenue(point)),
        (
            "cost",
            f"${point.cost_usd_per_h:.2f}/h (rental ${point.rental_usd_per_h:.2f} · "
            f"LLM ${point.llm_usd_per_h:.2f})",
        ),
        ("profit", _profit(point)),
    ]
    if point.loss_since is not None:
        rows.append(
            (
                "loss",
                f"since {point.loss_since:%H:%M}Z ({_minutes(point.loss_since, now)} min): "
                "revenue per proof under cost per proof",
            )
        )
    if point.note:
        rows.append(("note", single_line(point.note, _NOTE_CHARS)))
    return rows


def market_summary(point: MarketPoint | None, now: datetime) -> str:
    """One line under the fleet's table: the GPUs against the slots that
    bind them, the queue, the prices, requests and profit, and the age."""
    if point is None:
        return "market: no reading yet (the monitor keeps one per poll)"
    over = " (OVER the slots)" if point.gpus > point.slots_total else ""
    return (
        f"market: GPUs {point.gpus} of {point.slots_total} slots{over} "
        f"({point.slots_used} used) · queue {point.queued} waiting / {point.rows_open} open · "
        f"ask {fil(point.price_nfil)} FIL/proof (market {_market_price(point)}) · "
        f"requests {'on' if point.enabled else 'off'} · profit {_profit(point)} · "
        f"{point_age(point, now)}"
    )
