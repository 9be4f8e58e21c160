"""Failed notification deliveries as the store records them, for `status` and
the console.

The agent's status query knows the deliveries its own workflow started; the
fleet monitor sends "below target", "back in band" and a refused key itself,
and its failures are only in the store (`fa_notifications`, one row per
delivery and destination). So the CLI and the console show the store's list
when they can read it, and the query's otherwise. Reads only (synchronous).
"""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from fleet_agent.models import AgentStatus, NotifyFailure
from fleet_agent.store import Notifications
from starter.agent_client import CliError
from starter.views.runlog import open_store

__all__ = ["stored_failures", "with_stored_failures"]


def stored_failures(agent_id: str) -> list[NotifyFailure] | None:
    """The agent's latest failed deliveries, oldest first; None when the run
    log cannot be read (a CLI far from the worker's store)."""
    try:
        store = open_store()
    except CliError:
        return None
    try:
        rows = Notifications(store).recent_failures(agent_id)
    except SQLAlchemyError:
        return None
    finally:
        store.dispose()
    return [NotifyFailure(at=at, kind=kind, error=error) for at, kind, error in reversed(rows)]


def with_stored_failures(st: AgentStatus, failures: list[NotifyFailure] | None) -> AgentStatus:
    """`st` showing the store's failures (the monitor's too) when there is a list."""
    if failures is None:
        return st
    return st.model_copy(update={"notify_failures": failures})
