"""Whether a worker may create its store: a vanished store is never replaced silently.

A worker whose store is missing (SQLite file deleted) or empty (a new
PostgreSQL database) would create a new, empty one and the agents' run log and
conversation would be gone without a word. That is fine on a fresh machine,
and wrong when agents are running: then the worker refuses to start unless the
operator explicitly accepts a new store (`--new-store`, `FLEET_NEW_STORE=1`).
"""

from __future__ import annotations

from collections.abc import Sequence

from .engine import DATABASE_URL_ENV
from .records import StoreCondition

__all__ = ["NEW_STORE_ENV", "NEW_STORE_FLAG", "StoreRefused", "store_refusal"]

NEW_STORE_ENV = "FLEET_NEW_STORE"
NEW_STORE_FLAG = "--new-store"
# How many agent IDs a refusal names (it counts them all).
_NAMED_AGENTS = 10


class StoreRefused(RuntimeError):
    """The worker must not start on this store; the message says why and what to do."""


def store_refusal(
    condition: StoreCondition,
    *,
    where: str,
    namespace: str,
    agents: Sequence[str],
    allow_new: bool,
    agents_unknown: str = "",
) -> str | None:
    """Why the worker must not create the store at `where`, or None if it may open it.

    `agents` are the running agents (FleetAgentWorkflow executions) that this
    worker would serve; `agents_unknown` is why they could not be listed.
    An existing store is always opened (and upgraded); a missing or empty one
    is created unless agents run (or may run) that expect their old store.
    """
    if not condition.empty or allow_new:
        return None
    what = "does not exist" if not condition.exists else "has no fleet-agent tables"
    fix = (
        f"Point {DATABASE_URL_ENV} at their store, or pass {NEW_STORE_FLAG} "
        f"(or set {NEW_STORE_ENV}=1) to accept a new, empty store."
    )
    if agents_unknown:
        return (
            f"the store at {where} {what}, and whether agents are running in Temporal "
            f"namespace {namespace!r} could not be checked ({agents_unknown}). "
            "If they are, their run log and conversation are not in this store. " + fix
        )
    if not agents:
        return None
    named = ", ".join(repr(a) for a in agents[:_NAMED_AGENTS])
    more = f" and {len(agents) - _NAMED_AGENTS} more" if len(agents) > _NAMED_AGENTS else ""
    return (
        f"the store at {where} {what}, but {len(agents)} agent(s) are running in Temporal "
        f"namespace {namespace!r}: {named}{more}. Their run log and conversation are "
        "in another store (or lost): a new, empty store would forget them. " + fix
    )
