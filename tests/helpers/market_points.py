"""Market points for the tests of what shows them (status, fleet, the
console, the metrics, the model's context): one busy point, and a store
seeded with the last hours of a business that turned to a loss
(`seed_market`), with the agent's config in market mode."""

from __future__ import annotations

from datetime import datetime, timedelta

from fleet_agent.market.point import ChallengeLedger, MarketPoint
from fleet_agent.models import AgentConfig
from fleet_agent.store import AgentConfigs, MarketHistory, Store

SNARK = AgentConfig(
    market_mode="snark",
    market_challenges=500,
    market_min_price_nfil=1_000_000,
    market_max_price_nfil=9_000_000,
    market_max_withdrawals_per_hour=3,
)


def market_point(at: datetime, **fields: object) -> MarketPoint:
    """Six GPUs on ten slots, four of them busy, at 5 000 000 nFIL a proof
    against the market's 4 000 000, in profit."""
    base: dict[str, object] = {
        "at": at,
        "enabled": True,
        "price_nfil": 5_000_000,
        "market_price_nfil": 4_000_000,
        "asks_open": 2,
        "rows_open": 7,
        "pow_open": 1,
        "queued": 3,
        "ledger": ChallengeLedger(based_on=500, challenges=512),
        "slots_total": 10,
        "slots_used": 4,
        "gpus": 6,
        "paid_total_nfil": 4_000_000_000,
        "paid_proofs_per_h": 240.0,
        "revenue_nfil_per_h": 1_200_000_000.0,
        "fil_usd": 5.0,
        "fil_usd_source": "config",
        "revenue_usd_per_h": 6.0,
        "rental_usd_per_h": 3.5,
        "llm_usd_per_h": 0.5,
        "cost_usd_per_h": 4.0,
        "profit_usd_per_h": 2.0,
        "note": "profit $+2.00/h: hold",
    }
    return MarketPoint.model_validate(base | fields)


def seed_market(store: Store, agent_id: str, now: datetime) -> list[MarketPoint]:
    """The agent in market mode (its last known config) and a point every
    30 min over the last 3 h: revenue falls under cost (a loss since an hour
    ago), slots grow from 8 to 10, one reading had no FIL price."""
    AgentConfigs(store).save(agent_id, SNARK, now - timedelta(hours=4))
    points = []
    for back in range(6, -1, -1):
        at = now - timedelta(minutes=30 * back)
        revenue = 1.0 + back
        cost = 4.0
        priced = back != 4
        points.append(
            market_point(
                at,
                slots_total=8 if back > 3 else 10,
                slots_used=3 if back > 3 else 4,
                gpus=5 if back > 3 else 6,
                revenue_usd_per_h=revenue if priced else None,
                fil_usd=5.0 if priced else None,
                fil_usd_source="config" if priced else "none",
                cost_usd_per_h=cost,
                profit_usd_per_h=(revenue - cost) if priced else None,
                loss_since=now - timedelta(hours=1) if back <= 2 else None,
                note="at a loss: lower the fleet or stop asking" if back <= 2 else "hold",
            )
        )
    history = MarketHistory(store)
    for p in points:
        history.record(agent_id, p)
    return points
