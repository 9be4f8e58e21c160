"""The business on the Snark Market as the store keeps it, for `status`,
`fleet` and the console in market mode (AgentConfig.market_mode = "snark").

The monitor's `observe_market` writes one point per poll
(`fa_market_points`, fleet_agent/store/market_history.py); the agent's
status query carries none. So every view reads the store: `status` and the
console's status card when the query says the agent is in market mode
(`stored_market`, as starter/views/demand.py does for demand), and the
readers that never ask the agent (`fleet`, the console's plot and JSON)
when the agent's last known config (`fa_agent_configs`, which the agent
writes on every change) says so (`market_of`, `market_series`). A store that
cannot be read, or a row that no longer parses, shows as no reading: the
market never takes a view down. Reads only (synchronous); the text is
starter/views/market_render.py's.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from fleet_agent.market.point import MarketPoint
from fleet_agent.models import AgentStatus
from fleet_agent.store import AgentConfigs, MarketHistory, Store
from starter.agent_client import CliError
from starter.views.runlog import open_store

__all__ = ["latest_market", "market_mode_stored", "market_of", "market_series", "stored_market"]


def latest_market(store: Store, agent_id: str) -> MarketPoint | None:
    """The agent's latest point; None before the first reading, or when the
    table cannot be read or its row no longer parses."""
    try:
        return MarketHistory(store).latest(agent_id)
    except (SQLAlchemyError, ValidationError):
        return None


def stored_market(st: AgentStatus | None) -> MarketPoint | None:
    """For `status` and the console's card: the agent's latest point in
    market mode; None with the market off, before the first reading, or when
    the store cannot be read (a CLI far from the worker's store)."""
    if st is None or st.config.market_mode != "snark":
        return None
    try:
        store = open_store()
    except CliError:
        return None
    try:
        return latest_market(store, st.agent_id)
    finally:
        store.dispose()


def market_mode_stored(store: Store, agent_id: str) -> bool:
    """Whether the agent's last known config is in market mode (False when
    none is kept or the table cannot be read)."""
    try:
        config = AgentConfigs(store).load(agent_id)
    except SQLAlchemyError:
        return False
    return config is not None and config.market_mode == "snark"


def market_of(store: Store, agent_id: str) -> tuple[bool, MarketPoint | None]:
    """For the readers that never ask the agent: whether it is in market
    mode (its last known config) and, if so, its latest point."""
    if not market_mode_stored(store, agent_id):
        return False, None
    return True, latest_market(store, agent_id)


def market_series(store: Store, agent_id: str, start: datetime, end: datetime) -> list[MarketPoint]:
    """The points in [start, end], oldest first, in market mode only; a row
    that no longer parses or a table that cannot be read leaves the plot
    without the market, never without the fleet."""
    if not market_mode_stored(store, agent_id):
        return []
    try:
        series = MarketHistory(store).series(agent_id, start)
    except (SQLAlchemyError, ValidationError):
        return []
    return [p for p in series if p.at <= end]
