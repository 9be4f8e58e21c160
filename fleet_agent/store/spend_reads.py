"""Reads of the spend ledger: the summary, the fleet's $/hour at a moment, the lines.

`SpendReads` holds the engine and the tables; `fleet_agent.store.spend.SpendLedger`
adds the writes (accrue, open, close) on top.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict
from sqlalchemy import func, select

from fleet_agent.models import SpendSummary

from .base import Repository
from .store import Store
from .tables import SpendHourRow, SpendInstanceRow, table_of
from .timestamps import require_aware

__all__ = ["SpendInstance", "SpendReads"]

_HOUR = timedelta(hours=1)


class SpendInstance(BaseModel):
    """One machine's line in the ledger."""

    model_config = ConfigDict(frozen=True)

    instance_id: int
    started_at: datetime
    accrued_until: datetime
    ended_at: datetime | None
    closed_by: str
    dph: float
    usd: float


class SpendReads(Repository):
    """The ledger's tables and its reads (synchronous)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._machines = table_of(SpendInstanceRow)
        self._hours = table_of(SpendHourRow)

    def summary(self, agent_id: str, now: datetime) -> SpendSummary:
        """Today (UTC), the last 24 h (its oldest hour pro rata), this month
        (UTC), and the $/hour of the machines still open."""
        require_aware(now, "now")
        now = now.astimezone(UTC)
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        month = day.replace(day=1)
        window = now - timedelta(hours=24)
        first_hour = window.replace(minute=0, second=0, microsecond=0)
        h, m = self._hours, self._machines
        with self._engine.connect() as conn:
            hours = conn.execute(
                select(h.c.hour, func.sum(h.c.usd))
                .where(h.c.agent_id == agent_id, h.c.hour >= min(month, first_hour))
                .group_by(h.c.hour)
            ).all()
            dph, count, until = conn.execute(
                select(
                    func.coalesce(func.sum(m.c.dph).filter(m.c.ended_at.is_(None)), 0.0),
                    func.count().filter(m.c.ended_at.is_(None)),
                    func.max(m.c.accrued_until),
                ).where(m.c.agent_id == agent_id)
            ).one()
        today = last_24h = this_month = 0.0
        share = (first_hour + _HOUR - window).total_seconds() / 3600.0
        for hour, usd in hours:
            usd = float(usd or 0.0)
            today += usd if hour >= day else 0.0
            this_month += usd if hour >= month else 0.0
            if hour > first_hour:
                last_24h += usd
            elif hour == first_hour:
                last_24h += usd * share
        return SpendSummary(
            as_of=now,
            today_usd=round(today, 6),
            last_24h_usd=round(last_24h, 6),
            month_usd=round(this_month, 6),
            current_dph=round(float(dph), 6),
            open_instances=int(count),
            accrued_until=until,
        )

    def dph_at(self, agent_id: str, at: datetime) -> float:
        """The fleet's $/hour at `at`: every machine started by then and not
        ended, each at the rate it was billed at when last seen (the ledger
        keeps no history of rates)."""
        require_aware(at, "at")
        m = self._machines
        stmt = select(func.coalesce(func.sum(m.c.dph), 0.0)).where(
            m.c.agent_id == agent_id,
            m.c.started_at <= at,
            (m.c.ended_at.is_(None)) | (m.c.ended_at > at),
        )
        with self._engine.connect() as conn:
            return round(float(conn.execute(stmt).scalar_one()), 6)

    def open_rates(self, agent_id: str, ids: Iterable[int]) -> dict[int, float]:
        """The $/hour the ledger bills each of `ids` at, among the agent's
        machines still open."""
        m = self._machines
        stmt = select(m.c.instance_id, m.c.dph).where(
            m.c.agent_id == agent_id, m.c.ended_at.is_(None), m.c.instance_id.in_(list(ids))
        )
        with self._engine.connect() as conn:
            return {int(iid): float(dph) for iid, dph in conn.execute(stmt)}

    def instances(self, agent_id: str) -> list[SpendInstance]:
        """Every machine of the agent in the ledger, oldest first."""
        m = self._machines
        stmt = select(m).where(m.c.agent_id == agent_id).order_by(m.c.started_at, m.c.instance_id)
        with self._engine.connect() as conn:
            return [
                SpendInstance.model_validate(row, from_attributes=True)
                for row in conn.execute(stmt)
            ]
