"""What the agent's machines cost: the spend ledger's summary (fleet_agent/store/spend.py)."""

from __future__ import annotations

from datetime import datetime

from fleet_agent.wire import Wire

__all__ = ["SpendSummary"]


class SpendSummary(Wire):
    """Spend of one agent's machines, as the ledger had accrued it at `as_of`.

    Days and months are UTC. `last_24h_usd` counts the oldest hour of the
    window pro rata. `current_dph` is the $/hour of the machines the ledger
    holds open, each at the rate it is billed at (storage only while
    stopped). `accrued_until` is the latest time any machine was accrued to;
    spend after it is not counted yet.
    """

    as_of: datetime
    today_usd: float = 0.0
    last_24h_usd: float = 0.0
    month_usd: float = 0.0
    current_dph: float = 0.0
    open_instances: int = 0
    accrued_until: datetime | None = None

    def line(self, daily_budget_usd: float | None = None) -> str:
        """One line for the model and the operator:
        ``Spend: today $1.23 (budget $500.00), 24 h $2.00, month $9.87, now $0.412/h``."""
        budget = f" (budget ${daily_budget_usd:.2f})" if daily_budget_usd is not None else ""
        return (
            f"Spend: today ${self.today_usd:.2f}{budget}, 24 h ${self.last_24h_usd:.2f}, "
            f"month ${self.month_usd:.2f}, now ${self.current_dph:.3f}/h "
            f"({self.open_instances} machine(s); as of {self.as_of:%Y-%m-%d %H:%M} UTC)"
        )
