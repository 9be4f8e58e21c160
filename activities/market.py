"""The business on the Snark Market: the activity `observe_market` and the
tools `set_ask_price` and `set_requests`.

Touches: the operator's Curio node the worker's environment names
(`FLEET_MARKET_SOURCE=curio` on `FLEET_DEMAND_URL` and
`FLEET_DEMAND_METRICS_URL`: fleet_agent/market/settings.py), the market's
price (`FLEET_MARKET_PRICE_URL`) and FIL in dollars (`FLEET_FIL_USD_URL`),
over HTTP (activities/market_sources.py); the store's market history
(`fa_market_points`) and run costs (`fa_runs`, `fa_run_costs`); the tools
also the agent's live config (its workflow's `live_config` query) and the
tool journal (`fa_tool_calls`). No vast.ai, no secret.

`observe_market` never raises for what a source answers: the node
unreadable is a result with a refusal and no point (nothing changes); the
market's price or FIL/USD unreadable leaves that figure out. A store
failure raises, and Temporal retries it (a retry reads again).

The tools take a `FleetToolRequest` and answer a `ToolResult`, journalled
by tool_use_id as the fleet tools are (activities/fleet_calls.py): a call
that already ran returns its recorded result. A refusal (bad input,
``market_mode`` not ``snark``, paused or frozen, no market source, a guard:
fleet_agent/market/guards.py) is an error result naming the rule, and
nothing changed. What the node answers is never passed through raw: a
method's error is fenced (fleet_agent/untrusted.py), the worker's log names
methods only. Each tool sends ``PSSetMeta`` with the two fields it does not
change as ``PSGetMeta`` read them a moment before. The price is set first
and the asks withdrawn after, so the node asks again at the new price; each
withdrawal is counted in the ledger by a new point (the next reading
continues from it). A reading that ran at the same moment as a lever may
not see that point, and then the ledger misses those withdrawals until the
operator re-bases it (fleet_agent/market/ledger.py); so does a withdrawal
before any reading (no point to continue).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity

from fleet_agent.market.economics import assess
from fleet_agent.market.ledger import advance
from fleet_agent.market.parse import (
    market_reading,
    parse_fil_usd,
    parse_market_price,
)
from fleet_agent.market.point import (
    MarketLeverResult,
    MarketReading,
    MarketStepRequest,
    MarketStepResult,
    RequestsChange,
)
from fleet_agent.models import AgentConfig, FleetToolRequest, ToolResult
from fleet_agent.store import MarketHistory, Store

from .fleet_calls import ToolCalls
from .live_config import ConfigSource, WorkflowConfigSource
from .market_levers import Levers
from .market_sources import CurioMarket, Failed

__all__ = ["MarketActivities"]

log = logging.getLogger("fleet_agent.market")

_HOUR = timedelta(hours=1)


class MarketActivities:
    """Holds the worker's market client (None: FLEET_MARKET_SOURCE=none),
    the store and where live configs come from. `clock` (epoch seconds)
    dates readings and the tools' hour (the simulator's in tests)."""

    def __init__(
        self,
        client: CurioMarket | None = None,
        store: Store | None = None,
        configs: ConfigSource | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._store = store
        self._configs = configs or WorkflowConfigSource()
        self._clock = clock
        # Made at the first use: a worker whose agents run no market never
        # needs them (and a test's stand-in store need not be a real one).
        self._history: MarketHistory | None = None
        self._calls: ToolCalls | None = None

    def with_store(self, store: Store) -> MarketActivities:
        """These activities on `store` (the worker's), the client kept."""
        return MarketActivities(self._client, store, self._configs, self._clock)

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    def _need_store(self) -> tuple[MarketHistory, ToolCalls]:
        if self._store is None:
            raise RuntimeError("the market activities need the store (MarketActivities.with_store)")
        if self._history is None or self._calls is None:
            self._history = MarketHistory(self._store)
            self._calls = ToolCalls(self._store, self._configs, self._clock)
        return self._history, self._calls

    def _levers(self) -> Levers:
        history, calls = self._need_store()
        return Levers(self._client, history, calls, self._clock)

    # ------------------------------------------------------------ observe

    @activity.defn(name="observe_market")
    async def observe_market(self, req: MarketStepRequest) -> MarketStepResult:
        """Read the node (four web RPC methods and its metrics), the market's
        price and FIL/USD (HTTP); count the challenge ledger and the hour's
        revenue, cost and profit on the store's market history and run
        costs; keep the point (store). No reading: a refusal, no point."""
        history, _ = self._need_store()
        client = self._client
        if client is None:
            return MarketStepResult(refusal="no market source (FLEET_MARKET_SOURCE=none)")
        reading = await self._read(client, req)
        if isinstance(reading, str):
            log.warning("agent %s: market: no reading: %s", req.agent_id or "-", reading)
            return MarketStepResult(refusal=reading[:300])
        return await asyncio.to_thread(self._step, history, req, reading)

    async def _read(self, client: CurioMarket, req: MarketStepRequest) -> MarketReading | str:
        # The operator's figure wins: its URL is not read.
        node, price, usd = await client.observe(fil_usd=req.policy.fil_usd <= 0)
        if isinstance(node, Failed):
            return f"the node: {node.why}"
        price_body = self._optional(req, price, parse_market_price, "market price")
        usd_body = self._optional(req, usd, parse_fil_usd, "FIL/USD")
        return market_reading(
            node.meta,
            node.asks,
            node.queue,
            node.payments,
            node.metric_lines,
            price_body,
            usd_body,
            self._now(),
        )

    @staticmethod
    def _optional(
        req: MarketStepRequest, answer: Any, parse: Callable[[Any], Any], what: str
    ) -> Any:
        """`answer` if it parses, else None, with a log line of ours saying why."""
        if answer is None:
            return None
        why = answer.why if isinstance(answer, Failed) else parse(answer)
        if isinstance(why, str):
            log.warning("agent %s: market: %s not read: %s", req.agent_id or "-", what, why)
            return None
        return answer

    def _step(
        self, history: MarketHistory, req: MarketStepRequest, reading: MarketReading
    ) -> MarketStepResult:
        assert self._store is not None  # with the history (_need_store)
        at = reading.as_of
        prev = history.latest(req.agent_id)
        base = history.at_or_before(req.agent_id, at - _HOUR) or history.oldest_since(
            req.agent_id, at - _HOUR
        )
        ledger = advance(prev.ledger if prev is not None else None, reading, req.policy)
        llm = self._store.run_costs.llm_totals(req.agent_id, since=at - _HOUR).cost_usd
        result = assess(reading, ledger, req, prev, base, llm)
        assert result.point is not None  # assess always makes one
        history.record(req.agent_id, result.point)
        if result.loss_alert:
            log.warning("agent %s: %s", req.agent_id or "-", result.loss_alert)
        return result

    # ------------------------------------------------------------ levers

    @activity.defn(name="set_ask_price")
    async def set_ask_price(self, req: FleetToolRequest) -> ToolResult:
        """Tool: the node's ask price (``PSSetMeta``, requests and wallet
        kept as they are), guarded; with `reprice_open` the open asks at
        another price are withdrawn (``PSAskWithdraw``, 1 challenge proof
        each) and counted in the ledger (a new market point). Reads the
        node (``PSGetMeta``, ``PSListAsks``), the live config, the market
        history; journalled in the store."""
        _, calls = self._need_store()
        return await calls.journaled(req, self._levers().set_price)

    @activity.defn(name="set_requests")
    async def set_requests(self, req: FleetToolRequest) -> ToolResult:
        """Tool: the node asks the market for work or stops (``PSSetMeta``,
        wallet and price kept); off with `withdraw_open` also withdraws the
        open asks (``PSAskWithdraw``) within the hourly limit. Guarded; reads
        the node, the live config, the market history; journalled in the store."""
        _, calls = self._need_store()
        return await calls.journaled(req, self._levers().set_requests)

    @activity.defn(name="change_requests")
    async def change_requests(self, req: RequestsChange) -> MarketLeverResult:
        """The monitor's lever (a loss with market_on_loss "stop"): requests
        on or off as the tool `set_requests` turns them, with its guards and
        its journal, under a call id of the change's own (its reason names
        the loss), so a retried activity withdraws nothing twice. Reads the
        agent's live config; touches the node and the store as the tool does."""
        _, calls = self._need_store()
        key = hashlib.sha256(f"{req.agent_id}:{req.enabled}:{req.reason}".encode()).hexdigest()
        call = FleetToolRequest(
            agent_id=req.agent_id,
            run=0,
            round=0,
            tool_use_id=f"monitor_{key[:24]}",
            name="set_requests",
            input={
                "enabled": req.enabled,
                "withdraw_open": req.withdraw_open,
                "reason": req.reason or "the monitor",
            },
            config=AgentConfig(market_mode="snark"),  # the live config is read, not this
        )
        result = await calls.journaled(call, self._levers().set_requests)
        line = result.content.splitlines()[0] if result.content else ""
        if result.is_error:
            return MarketLeverResult(ok=False, refused=line[:600])
        return MarketLeverResult(ok=True, summary=line[:600])
