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
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity

from fleet_agent.demand.reading import Refused
from fleet_agent.market.economics import assess
from fleet_agent.market.guards import (
    price_refusal,
    requests_refusal,
    withdraw_allowance,
    withdraw_refusal,
    withdrawals_last_hour,
)
from fleet_agent.market.ledger import advance, withdrew
from fleet_agent.market.levers import (
    SetAskPriceInput,
    SetRequestsInput,
    lever_input,
    price_change,
    requests_change,
)
from fleet_agent.market.parse import (
    Ask,
    Meta,
    fil_text,
    market_reading,
    parse_asks,
    parse_fil_usd,
    parse_market_price,
    parse_meta,
    rpc_result,
)
from fleet_agent.market.point import (
    MarketPoint,
    MarketReading,
    MarketStepRequest,
    MarketStepResult,
)
from fleet_agent.models import AgentConfig, FleetToolRequest, ToolResult
from fleet_agent.store import MarketHistory, Store, ToolCallRecord

from .fleet_calls import ToolCalls, paused_result
from .fleet_results import tool_result
from .live_config import ConfigSource, WorkflowConfigSource
from .market_sources import CurioMarket, Failed, rpc_error_text

__all__ = ["MarketActivities"]

log = logging.getLogger("fleet_agent.market")

_HOUR = timedelta(hours=1)
_NOTHING = "Nothing changed."
_REASON_CHARS = 200


def _fil(nfil: int) -> str:
    return f"{fil_text(nfil)} FIL/P ({nfil} nFIL)"


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
        llm = self._store.llm_totals(req.agent_id, since=at - _HOUR).cost_usd
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
        return await calls.journaled(req, self._set_price)

    @activity.defn(name="set_requests")
    async def set_requests(self, req: FleetToolRequest) -> ToolResult:
        """Tool: the node asks the market for work or stops (``PSSetMeta``,
        wallet and price kept); off with `withdraw_open` also withdraws the
        open asks (``PSAskWithdraw``) within the hourly limit. Guarded; reads
        the node, the live config, the market history; journalled in the store."""
        _, calls = self._need_store()
        return await calls.journaled(req, self._set_requests)

    async def _lever_refusal(
        self, req: FleetToolRequest, calls: ToolCalls
    ) -> tuple[AgentConfig, CurioMarket] | ToolResult:
        """The live config and the client, or the refusal every lever shares."""
        config = await calls.config(req, mutating=True)
        if config.market_mode != "snark":
            return tool_result(
                req,
                f"Refused: market_mode is {config.market_mode}, not snark: the agent does not "
                f"run the business on the Snark Market. {_NOTHING}",
                error=True,
            )
        if config.paused or config.frozen:
            return paused_result(req, config, "changed at the market")
        if self._client is None:
            return tool_result(
                req,
                f"Refused: the worker reads no market (FLEET_MARKET_SOURCE=none). {_NOTHING}",
                error=True,
            )
        return config, self._client

    async def _meta(self, req: FleetToolRequest, client: CurioMarket) -> Meta | ToolResult:
        answer = await client.call("CurioWeb.PSGetMeta", [])
        try:
            if isinstance(answer, Failed):
                raise Refused(answer.why)
            return parse_meta(answer)
        except Refused as exc:
            log.warning("agent %s: %s: PSGetMeta: %s", req.agent_id, req.name, exc)
            return tool_result(
                req, f"Could not read the node's settings ({exc}). {_NOTHING}", error=True
            )

    async def _asks(self, req: FleetToolRequest, client: CurioMarket) -> list[Ask] | ToolResult:
        answer = await client.call("CurioWeb.PSListAsks", [])
        try:
            if isinstance(answer, Failed):
                raise Refused(answer.why)
            return parse_asks(answer)
        except Refused as exc:
            log.warning("agent %s: %s: PSListAsks: %s", req.agent_id, req.name, exc)
            return tool_result(
                req, f"Could not read the node's open asks ({exc}). {_NOTHING}", error=True
            )

    async def _points(self, agent_id: str) -> tuple[MarketPoint | None, int]:
        """The latest point and the asks withdrawn in the last hour."""
        history, _ = self._need_store()
        now = self._now()

        def read() -> tuple[MarketPoint | None, int]:
            latest = history.latest(agent_id)
            hour_ago = history.at_or_before(agent_id, now - _HOUR)
            return latest, withdrawals_last_hour(latest, hour_ago)

        return await asyncio.to_thread(read)

    async def _set_meta(
        self, client: CurioMarket, enabled: bool, wallet: str, price_nfil: int
    ) -> str | None:
        """PSSetMeta; None when the node took it, else why not (fenced)."""
        answer = await client.call("CurioWeb.PSSetMeta", [enabled, wallet, fil_text(price_nfil)])
        if isinstance(answer, Failed):
            return answer.why
        error = rpc_error_text(answer)
        if error is not None:
            return f"the node answered {error}"
        try:
            rpc_result(answer, "PSSetMeta")
        except Refused as exc:
            return str(exc)
        return None

    async def _withdraw(
        self, req: FleetToolRequest, client: CurioMarket, asks: list[Ask]
    ) -> tuple[int, str]:
        """Withdraw `asks` one by one; how many went, and why the rest did not."""
        done = 0
        for ask in asks:
            answer = await client.call("CurioWeb.PSAskWithdraw", [ask.id])
            why = answer.why if isinstance(answer, Failed) else rpc_error_text(answer)
            if why is None and not (isinstance(answer, dict) and answer.get("jsonrpc") == "2.0"):
                why = "not a JSON-RPC 2.0 answer"
            if why is not None:
                log.warning("agent %s: %s: PSAskWithdraw failed", req.agent_id, req.name)
                return done, f"Withdrawing ask {ask.id} failed: {why}"
            done += 1
        return done, ""

    async def _count_withdrawals(self, agent_id: str, n: int, **changes: Any) -> int | None:
        """A new point with `n` withdrawals in its ledger (and `changes`);
        the balance the agent counts after them, None without a point."""
        if n <= 0:
            return None
        history, _ = self._need_store()
        now = self._now()

        def write() -> int | None:
            latest = history.latest(agent_id)
            if latest is None:
                return None
            ledger = withdrew(latest.ledger, n)
            # After the latest point even on a clock that has not moved.
            at = max(now, latest.at + timedelta(microseconds=1))
            update = {"at": at, "ledger": ledger, "slots_total": ledger.slots, **changes}
            history.record(agent_id, latest.model_copy(update=update))
            return ledger.challenges

        return await asyncio.to_thread(write)

    @staticmethod
    def _spent(n: int, balance: int | None) -> str:
        if n <= 0:
            return ""
        left = f"; about {balance} left by the agent's count" if balance is not None else ""
        return f" ({n} challenge proof(s) spent{left})"

    async def _set_price(self, req: FleetToolRequest, _: ToolCallRecord | None) -> ToolResult:
        args = lever_input(SetAskPriceInput, req.input)
        if isinstance(args, str):
            return tool_result(req, f"Invalid input for {req.name}: {args}", error=True)
        calls = self._need_store()[1]
        shared = await self._lever_refusal(req, calls)
        if isinstance(shared, ToolResult):
            return shared
        config, client = shared
        change = price_change(args, req.agent_id, config.market_policy())
        meta = await self._meta(req, client)
        if isinstance(meta, ToolResult):
            return meta
        stale: list[Ask] = []
        if change.reprice_open:
            asks = await self._asks(req, client)
            if isinstance(asks, ToolResult):
                return asks
            stale = [a for a in asks if a.price_nfil != change.price_nfil]
        latest, withdrawn = await self._points(req.agent_id)
        refusal = price_refusal(change, meta.price_nfil) or withdraw_refusal(
            len(stale), latest, withdrawn, change.policy
        )
        if refusal is None and not meta.wallet:
            refusal = "the node has no wallet (the operator sets it in Curio's Snark Market page)"
        if refusal is not None:
            return tool_result(req, f"Refused: {refusal}. {_NOTHING}", error=True)
        plan = f"set the ask price to {_fil(change.price_nfil)}, was {_fil(meta.price_nfil)}"
        if stale:
            plan += f", and withdraw {len(stale)} open ask(s) at other prices"
        if config.dry_run:
            return tool_result(req, f"DRY RUN: would {plan}. {_NOTHING}")
        await calls.start(req)
        failed = await self._set_meta(client, meta.enabled, meta.wallet, change.price_nfil)
        if failed is not None:
            log.warning("agent %s: set_ask_price: PSSetMeta failed", req.agent_id)
            return tool_result(
                req,
                f"The node did not take the price ({failed}); the next market reading shows "
                "the price it has. No ask was withdrawn.",
                error=True,
            )
        log.info("agent %s: ask price set to %d nFIL", req.agent_id, change.price_nfil)
        done, why = await self._withdraw(req, client, stale)
        balance = await self._count_withdrawals(req.agent_id, done, price_nfil=change.price_nfil)
        text = f"Ask price set to {_fil(change.price_nfil)}, was {_fil(meta.price_nfil)}."
        if stale:
            text += f" Withdrew {done} of {len(stale)} open ask(s) at other prices"
            text += self._spent(done, balance) + "; the node asks again at the new price."
        elif change.reprice_open:
            text += " No open ask was at another price: none withdrawn."
        else:
            text += " Open asks keep their price until assigned (reprice_open withdraws them)."
        if why:
            text += f" {why}."
        reason = change.reason[:_REASON_CHARS]
        return tool_result(req, f"{text} Reason given: {reason}", mutating=True)

    async def _set_requests(self, req: FleetToolRequest, _: ToolCallRecord | None) -> ToolResult:
        args = lever_input(SetRequestsInput, req.input)
        if isinstance(args, str):
            return tool_result(req, f"Invalid input for {req.name}: {args}", error=True)
        calls = self._need_store()[1]
        shared = await self._lever_refusal(req, calls)
        if isinstance(shared, ToolResult):
            return shared
        config, client = shared
        change = requests_change(args, req.agent_id, config.market_policy())
        meta = await self._meta(req, client)
        if isinstance(meta, ToolResult):
            return meta
        latest, withdrawn = await self._points(req.agent_id)
        refusal = requests_refusal(change.enabled, latest, meta.wallet)
        if refusal is not None:
            return tool_result(req, f"Refused: {refusal}. {_NOTHING}", error=True)
        if not meta.wallet:
            # Off without a wallet: Curio's request task needs one, so the
            # node asks for nothing, and PSSetMeta would refuse the empty address.
            return tool_result(req, f"The node has no wallet, so it asks for no work. {_NOTHING}")
        withdrawing: list[Ask] = []
        kept_open = 0
        if not change.enabled and change.withdraw_open:
            asks = await self._asks(req, client)
            if isinstance(asks, ToolResult):
                return asks
            allowance = withdraw_allowance(change.policy, withdrawn)
            withdrawing, kept_open = asks[:allowance], max(0, len(asks) - allowance)
        verb = "on" if change.enabled else "off"
        plan = f"turn requests {verb} (they are {'on' if meta.enabled else 'off'})"
        if withdrawing:
            plan += f" and withdraw {len(withdrawing)} open ask(s)"
        if config.dry_run:
            return tool_result(req, f"DRY RUN: would {plan}. {_NOTHING}")
        await calls.start(req)
        failed = await self._set_meta(client, change.enabled, meta.wallet, meta.price_nfil)
        if failed is not None:
            log.warning("agent %s: set_requests: PSSetMeta failed", req.agent_id)
            return tool_result(
                req,
                f"The node did not take the change ({failed}); the next market reading shows "
                "whether it asks for work. No ask was withdrawn.",
                error=True,
            )
        log.info("agent %s: market requests %s", req.agent_id, verb)
        done, why = await self._withdraw(req, client, withdrawing)
        balance = await self._count_withdrawals(req.agent_id, done, enabled=change.enabled)
        if change.enabled:
            text = (
                f"Requests on: the node asks the market for work at {_fil(meta.price_nfil)}, "
                "one ask per free slot."
            )
        else:
            text = "Requests off: the node starts no new request (a request under way finishes)."
            if withdrawing:
                text += f" Withdrew {done} of {len(withdrawing)} open ask(s)"
                text += self._spent(done, balance) + "."
            if kept_open:
                text += (
                    f" {kept_open} ask(s) stay open: market_max_withdrawals_per_hour="
                    f"{change.policy.max_withdrawals_per_hour} is reached for this hour."
                )
            if not change.withdraw_open:
                text += " Open asks stay open and may still be assigned work (withdraw_open)."
        if why:
            text += f" {why}."
        reason = change.reason[:_REASON_CHARS]
        return tool_result(req, f"{text} Reason given: {reason}", mutating=True)
