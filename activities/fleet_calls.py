"""What every fleet tool call goes through: the live config and the journal.

`ToolCalls.config` reads the agent's config at the moment of the call
(activities/live_config.py). `ToolCalls.journaled` returns the recorded result
of a call that already ran (fleet_agent/store/journal.py), so a call replayed
after `temporal workflow reset` never touches the fleet again, and heartbeats
while the call waits on vast.ai.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from temporalio.exceptions import ApplicationError

from fleet_agent.models import AgentConfig, FleetToolRequest, ToolResult
from fleet_agent.store import CreateInFlight, Store, ToolCallRecord, ToolJournal

from .fleet_results import replayed, slim, tool_result
from .heartbeat import heartbeating
from .live_config import ConfigSource, LiveConfigUnavailable

__all__ = ["Body", "ToolCalls", "paused_result"]

_log = logging.getLogger(__name__)

#: A tool's own work, given the unfinished journal record of an earlier
#: attempt of the same call (None: no earlier attempt reached vast.ai).
Body = Callable[[FleetToolRequest, ToolCallRecord | None], Awaitable[ToolResult]]


class ToolCalls:
    """The live config and the journal, for the fleet tools of one worker."""

    def __init__(
        self, store: Store, configs: ConfigSource, clock: Callable[[], float] = time.time
    ) -> None:
        self._journal = ToolJournal(store)
        self._configs = configs
        # The fleet's clock (vast.ai's time; the simulator's in tests and
        # benchmarks): the hourly rates count in the time the fleet lives in.
        self._clock = clock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    async def config(self, req: FleetToolRequest, *, mutating: bool) -> AgentConfig:
        """The agent's config now. A tool that changes the fleet never acts on
        a stale one (retryable error); a read falls back to the run's config."""
        try:
            return await self._configs.live_config(req.agent_id)
        except LiveConfigUnavailable as exc:
            if mutating:
                raise ApplicationError(
                    f"{exc}; not acting on the config the run started with",
                    type="LiveConfigUnavailable",
                ) from None
            _log.warning("%s: %s; using the run's config", req.name, exc)
            return req.config

    async def journaled(self, req: FleetToolRequest, body: Body) -> ToolResult:
        """The recorded result of this tool call if it has one; else run `body`
        and record its result. The first result recorded is the one returned;
        an approval ask is not a result (the call comes again, decided). With
        `req.slim` the result is returned `slim`: its text stays in the journal,
        out of the run workflow's history."""
        async with heartbeating():
            record = await asyncio.to_thread(self._journal.get, req.agent_id, req.tool_use_id)
            if record is not None and record.result is not None:
                return slim(replayed(record)) if req.slim else replayed(record)
            result = await body(req, record)
            if result.approval is not None:
                # Nothing was done: the run asks an operator and calls again.
                return result
            result = await self.finish(req, result)
            return slim(result) if req.slim else result

    async def rate_refusal(self, req: FleetToolRequest, per_hour: int) -> str | None:
        """Why this create/destroy would exceed `per_hour` fleet changes of its
        kind in the last hour (the journal counts them), or None. An earlier
        attempt of this very call is not counted against it."""
        now = self._now()
        done = await asyncio.to_thread(
            self._journal.changes_since,
            req.agent_id,
            req.name,
            now - timedelta(hours=1),
            req.tool_use_id,
        )
        if len(done) < per_hour:
            return None
        verb = "rented" if req.name == "create_instance" else "destroyed"
        key = "max_creates_per_hour" if req.name == "create_instance" else "max_destroys_per_hour"
        if per_hour == 0:
            return f"Refused: {key} is 0; no machine may be {verb}. Nothing was {verb}."
        free_at = done[-per_hour] + timedelta(hours=1)
        return (
            f"Refused: {len(done)} machine(s) {verb} in the last hour, the most "
            f"{key}={per_hour} allows; the next one is allowed at {free_at:%H:%M:%S} UTC. "
            f"Nothing was {verb}."
        )

    async def released(self, req: FleetToolRequest) -> set[int]:
        """The machines this agent's other destroy calls released (or are
        releasing) in the last hour, from the journal (`releases_since`)."""
        return await asyncio.to_thread(
            self._journal.releases_since,
            req.agent_id,
            self._now() - timedelta(hours=1),
            req.tool_use_id,
        )

    async def start(self, req: FleetToolRequest, reserved_dph: float | None = None) -> None:
        """Journal the call before it reaches vast.ai with a change; a create
        holds `reserved_dph` against the caps until it has a result."""
        await asyncio.to_thread(self._journal.start, req, self._now(), reserved_dph)

    async def creates_in_flight(self, agent_id: str, except_call: str = "") -> list[CreateInFlight]:
        """The agent's create calls started and not finished, but `except_call`
        (a run that timed out may have left one still renting)."""
        return await asyncio.to_thread(
            self._journal.creates_in_flight, agent_id, self._now(), except_call
        )

    async def finish(self, req: FleetToolRequest, result: ToolResult) -> ToolResult:
        """Record `result`; returns the recorded one (an earlier, overlapping
        attempt's if it finished first). Repeating it only reads the row back."""
        record = await asyncio.to_thread(self._journal.finish, req, result, self._now())
        return record.result or result


def paused_result(req: FleetToolRequest, config: AgentConfig, what: str) -> ToolResult:
    """A paused or frozen agent changes nothing: the refusal the model gets."""
    if config.frozen:
        return tool_result(
            req,
            f"Refused: the agent is frozen (the operator's kill switch); nothing was {what}. "
            "Nothing changes in the fleet until an operator unfreezes the agent.",
            error=True,
        )
    return tool_result(
        req,
        f"Refused: the agent is paused (config paused=true); nothing was {what}. "
        "Fleet changes wait until the operator resumes the agent.",
        error=True,
    )
