"""The latest reading of demand as the store keeps it, for `status` and the
console in demand mode.

The monitor writes one point per poll (`fa_demand_points`); the agent's
status query only has the point its last target change was decided on. So
the CLI and the console show the store's latest when they can read it, and
the query's otherwise (starter/views/render.py, `demand_text`). Reads only
(synchronous).
"""

from __future__ import annotations

from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from fleet_agent.demand.point import DemandPoint
from fleet_agent.models import AgentStatus
from fleet_agent.store import DemandHistory
from starter.agent_client import CliError
from starter.views.runlog import open_store

__all__ = ["stored_demand"]


def stored_demand(st: AgentStatus | None) -> DemandPoint | None:
    """The agent's latest point in demand mode; None in fixed mode, before
    the first reading, or when the store cannot be read (a CLI far from the
    worker's store) or its row no longer parses."""
    if st is None or st.config.target_mode != "demand":
        return None
    try:
        store = open_store()
    except CliError:
        return None
    try:
        return DemandHistory(store).latest(st.agent_id)
    except (SQLAlchemyError, ValidationError):
        return None
    finally:
        store.dispose()
