"""Reading demand: the activity `read_demand`.

Touches: the demand source the worker's environment names
(`FLEET_DEMAND_SOURCE`, `FLEET_DEMAND_URL`, `FLEET_DEMAND_TOKEN`,
`FLEET_DEMAND_METRICS_URL`:
fleet_agent/demand/settings.py), over HTTP (activities/demand_sources.py);
nothing else: no store, no vast.ai. The token stays in this process.

It never raises for what a source answers or fails to: a bad field, a
flood, a timeout or a refused connection is a `DemandReadResult` with no
reading and one line why (its `summary` is what callers show). A missing
reading is not worth a retry here: the caller reads again at its next
poll, and holds its target meanwhile.
"""

from __future__ import annotations

import logging
from typing import Protocol

from temporalio import activity

from fleet_agent.demand.reading import DemandReadRequest, DemandReadResult
from fleet_agent.demand.settings import DemandEnv

from .demand_sources import CurioSource, HttpJsonSource, NoSource

__all__ = ["DemandActivities", "DemandSource", "source_from_env"]

log = logging.getLogger("fleet_agent.demand")


class DemandSource(Protocol):
    name: str

    async def read(self) -> DemandReadResult: ...


def source_from_env(env: DemandEnv) -> DemandSource:
    """The client `env` names (checked when it was loaded: DemandEnv.load)."""
    if env.source == "curio" and env.url and env.metrics_url:
        return CurioSource(env.url, env.metrics_url)
    if env.source == "http" and env.url:
        token = env.token.get_secret_value() if env.token is not None else None
        return HttpJsonSource(env.url, token)
    return NoSource()


class DemandActivities:
    """Holds the worker's one demand source."""

    def __init__(self, source: DemandSource | None = None) -> None:
        self._source = source or NoSource()

    @activity.defn(name="read_demand")
    async def read_demand(self, req: DemandReadRequest) -> DemandReadResult:
        """One reading of the worker's demand source (HTTP), or why there is none."""
        try:
            result = await self._source.read()
        except Exception as exc:  # a bug here must not fail the caller's poll
            log.exception("agent %s: reading demand failed", req.agent_id or "-")
            result = DemandReadResult(
                source=self._source.name, refusal=f"reading failed ({type(exc).__name__})"
            )
        if result.reading is None and self._source.name != "none":
            log.warning("agent %s: %s", req.agent_id or "-", result.summary)
        return result
