"""Reading demand: the activities `read_demand` and `observe_demand`.

Touches: the demand source the worker's environment names
(`FLEET_DEMAND_SOURCE`, `FLEET_DEMAND_URL`, `FLEET_DEMAND_TOKEN`,
`FLEET_DEMAND_METRICS_URL`:
fleet_agent/demand/settings.py), over HTTP (activities/demand_sources.py);
`observe_demand` also the store's demand history (`fa_demand_points`). No
vast.ai. The token stays in this process.

It never raises for what a source answers or fails to: a bad field, a
flood, a timeout or a refused connection is a `DemandReadResult` with no
reading and one line why (its `summary` is what callers show). A missing
reading is not worth a retry here: the caller reads again at its next
poll, and holds its target meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from temporalio import activity

from fleet_agent.demand.point import DemandStepRequest, DemandStepResult
from fleet_agent.demand.reading import DemandReading, DemandReadRequest, DemandReadResult
from fleet_agent.demand.settings import DemandEnv
from fleet_agent.demand.step import decide, history_windows
from fleet_agent.store import DemandHistory, Store

from .demand_sources import CurioSource, HttpJsonSource, NoSource, RouterSource

__all__ = ["DemandActivities", "DemandSource", "source_from_env"]

log = logging.getLogger("fleet_agent.demand")


class DemandSource(Protocol):
    name: str

    async def read(self) -> DemandReadResult: ...


def source_from_env(env: DemandEnv) -> DemandSource:
    """The client `env` names (checked when it was loaded: DemandEnv.load)."""
    if env.source == "curio" and env.url and env.metrics_url:
        return CurioSource(env.url, env.metrics_url)
    if env.source == "router":
        return RouterSource()  # on the worker's store: DemandActivities.with_store
    if env.source == "http" and env.url:
        token = env.token.get_secret_value() if env.token is not None else None
        return HttpJsonSource(env.url, token)
    return NoSource()


class DemandActivities:
    """Holds the worker's one demand source and, for `observe_demand`, the store."""

    def __init__(self, source: DemandSource | None = None, store: Store | None = None) -> None:
        self._source = source or NoSource()
        self._store = store
        # Made at the first step: only demand mode's monitors need it.
        self._history: DemandHistory | None = None

    def with_store(self, store: Store) -> DemandActivities:
        """These activities on `store` (the worker's), the source kept (the
        router's queue is read from that store)."""
        source = self._source
        if isinstance(source, RouterSource):
            source = source.with_store(store)
        return DemandActivities(source, store)

    @activity.defn(name="read_demand")
    async def read_demand(self, req: DemandReadRequest) -> DemandReadResult:
        """One reading of the worker's demand source (HTTP), or why there is none."""
        return await self._read(req.agent_id)

    @activity.defn(name="observe_demand")
    async def observe_demand(self, req: DemandStepRequest) -> DemandStepResult:
        """Demand mode's step for one agent (its monitor calls it after each
        poll): read the source, decide the target on the reading and the
        history (fleet_agent/demand/step.py), keep the point in the store.
        No reading is an answer with no decision (the target holds); a store
        failure raises, and Temporal retries it (a retry reads again)."""
        read = await self._read(req.agent_id)
        if read.reading is None:
            return DemandStepResult(source=read.source, refusal=read.refusal)
        return await asyncio.to_thread(self._step, req, read.reading, read.source)

    def _step(
        self, req: DemandStepRequest, reading: DemandReading, source: str
    ) -> DemandStepResult:
        if self._history is None:
            if self._store is None:
                raise RuntimeError("observe_demand needs the store (DemandActivities(store=...))")
            self._history = DemandHistory(self._store)
        windows = history_windows(reading.as_of, req.policy.lead_minutes)
        history = self._history.samples(req.agent_id, windows)
        decision, point = decide(reading, history, req)
        self._history.record(req.agent_id, point)
        return DemandStepResult(source=source, decision=decision, point=point)

    async def _read(self, agent_id: str) -> DemandReadResult:
        try:
            if isinstance(self._source, RouterSource):
                result = await self._source.read_for(agent_id)
            else:
                result = await self._source.read()
        except Exception as exc:  # a bug here must not fail the caller's poll
            log.exception("agent %s: reading demand failed", agent_id or "-")
            result = DemandReadResult(
                source=self._source.name, refusal=f"reading failed ({type(exc).__name__})"
            )
        if result.reading is None and self._source.name != "none":
            log.warning("agent %s: %s", agent_id or "-", result.summary)
        return result
