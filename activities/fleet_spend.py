"""The fleet activities' side of the spend ledger (fleet_agent/store/spend.py).

`SpendBook` runs the ledger's store calls in a thread (they block), dated by
the fleet activities' clock: the views accrue the fleet they list (the
monitor's poll every poll), the create tool accrues before its budget check
and opens what it rented, the destroy tool and the freeze's `stop_fleet`
close what they destroyed. The ledger itself refuses what would credit it
(negative amounts: fleet_agent/store/spend.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from fleet_agent.fleet.budget import DAY, budget_refusal
from fleet_agent.models import AgentConfig, SpendSummary
from fleet_agent.store import SpendLedger, Store, TrendReads
from fleet_agent.vast.models import Instance

__all__ = ["SpendBook"]


class SpendBook:
    """The ledger for one worker's fleet activities."""

    def __init__(self, store: Store, clock: Callable[[], float]) -> None:
        self._ledger = SpendLedger(store)
        self._hours = TrendReads(store)
        self._clock = clock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    async def accrue(self, agent_id: str, fleet: Iterable[Instance]) -> None:
        """Bring the agent's listed fleet up to now; close what it no longer lists."""
        members = list(fleet)
        await asyncio.to_thread(self._ledger.accrue, agent_id, members, self._now())

    async def open(self, agent_id: str, inst: Instance) -> None:
        """Put a machine just rented in the ledger (billed from its start)."""
        await asyncio.to_thread(self._ledger.open, agent_id, inst, self._now())

    async def close(self, agent_id: str, instance_id: int, inst: Instance | None = None) -> None:
        """A machine our tools destroyed just now: billed up to now, then ended."""
        await asyncio.to_thread(self._ledger.close, agent_id, instance_id, self._now(), inst)

    async def summary(self, agent_id: str) -> SpendSummary:
        """The agent's spend as the ledger has it now."""
        return await asyncio.to_thread(self._ledger.summary, agent_id, self._now())

    async def dph_hour_ago(self, agent_id: str) -> float:
        """What the agent's fleet billed per hour an hour ago (the ledger's
        machines, each at its last-seen rate)."""
        hour_ago = datetime.fromtimestamp(self._clock() - 3600, UTC)
        return await asyncio.to_thread(self._ledger.dph_at, agent_id, hour_ago)

    async def budget_refusal(
        self,
        agent_id: str,
        fleet: Iterable[Instance],
        offer_dph: float,
        config: AgentConfig,
        in_flight_dph: float = 0.0,
        beyond_ledger_dph: float = 0.0,
    ) -> str | None:
        """Why renting at `offer_dph` would break `daily_budget_usd` over some
        24 hours (fleet_agent/fleet/budget.py), or None; the listed fleet is
        accrued first, so the spend is fresh. `beyond_ledger_dph`: what the
        fleet costs beyond the ledger's rate (fleet_agent/fleet/guardrails.py,
        `beyond_ledger_dph`)."""
        members = list(fleet)
        await self.accrue(agent_id, members)
        spend = await self.summary(agent_id)
        now = spend.as_of
        hours = await asyncio.to_thread(self._hours.spend_hours_since, agent_id, now - DAY)
        # A machine whose row does not parse goes on in the ledger at its last
        # rate; `beyond_ledger_dph` counts it at the cap's instead.
        unreadable = [i.id for i in members if i.unreadable is not None]
        replaced = (
            await asyncio.to_thread(self._ledger.open_rates, agent_id, unreadable)
            if unreadable
            else {}
        )
        return budget_refusal(
            [(h.hour, h.usd) for h in hours],
            now,
            fleet_dph=max(0.0, spend.current_dph - sum(replaced.values())),
            added_dph=offer_dph,
            budget_usd=config.daily_budget_usd,
            in_flight_dph=in_flight_dph,
            beyond_ledger_dph=beyond_ledger_dph,
        )
