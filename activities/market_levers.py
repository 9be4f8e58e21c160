"""The Snark Market's levers behind the tools `set_ask_price` and
`set_requests` and the monitor's `change_requests` (activities/market.py
holds the activities): each reads the node (``PSGetMeta``, ``PSListAsks``),
checks the guards (fleet_agent/market/guards.py), sends ``PSSetMeta`` with
the two fields it does not change as ``PSGetMeta`` read them a moment
before, withdraws asks (``PSAskWithdraw``) and counts them in the ledger (a
new market point). The price is set first and the asks withdrawn after, so
the node asks again at the new price.

Touches: the Curio node (web RPC), the store's market history and tool
journal, the agent's live config (through `ToolCalls`). No vast.ai.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from fleet_agent.demand.reading import Refused
from fleet_agent.market.guards import (
    price_refusal,
    requests_refusal,
    withdraw_allowance,
    withdraw_refusal,
    withdrawals_last_hour,
)
from fleet_agent.market.ledger import withdrew
from fleet_agent.market.levers import (
    SetAskPriceInput,
    SetRequestsInput,
    lever_input,
    price_change,
    requests_change,
)
from fleet_agent.market.parse import Ask, Meta, fil_text, parse_asks, parse_meta, rpc_result
from fleet_agent.market.point import MarketPoint
from fleet_agent.models import AgentConfig, FleetToolRequest, ToolResult
from fleet_agent.store import MarketHistory, ToolCallRecord

from .fleet_calls import ToolCalls, paused_result
from .fleet_results import tool_result
from .market_sources import CurioMarket, Failed, rpc_error_text

__all__ = ["Levers"]

log = logging.getLogger("fleet_agent.market")

_HOUR = timedelta(hours=1)
_NOTHING = "Nothing changed."
_REASON_CHARS = 200


def _fil(nfil: int) -> str:
    return f"{fil_text(nfil)} FIL/P ({nfil} nFIL)"


class Levers:
    """The levers on one worker's market client, store and clock."""

    def __init__(
        self,
        client: CurioMarket | None,
        history: MarketHistory,
        calls: ToolCalls,
        clock: Callable[[], float],
    ) -> None:
        self._client = client
        self._history = history
        self._calls = calls
        self._clock = clock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    async def _open(
        self, req: FleetToolRequest, args: object
    ) -> tuple[AgentConfig, CurioMarket, Meta] | ToolResult:
        """What every lever starts with: its input checked (`args`, or why
        not), the shared refusals, the node's settings read."""
        if isinstance(args, str):
            return tool_result(req, f"Invalid input for {req.name}: {args}", error=True)
        shared = await self._lever_refusal(req, self._calls)
        if isinstance(shared, ToolResult):
            return shared
        config, client = shared
        meta = await self._meta(req, client)
        if isinstance(meta, ToolResult):
            return meta
        return config, client, meta

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
        history = self._history
        now = self._now()

        def read() -> tuple[MarketPoint | None, int]:
            latest = history.latest(agent_id)
            hour_ago = history.at_or_before(agent_id, now - _HOUR)
            return latest, withdrawals_last_hour(latest, hour_ago)

        return await asyncio.to_thread(read)

    async def _send(
        self,
        req: FleetToolRequest,
        config: AgentConfig,
        plan: str,
        enabled: bool,
        wallet: str,
        price_nfil: int,
        shows: str,
    ) -> ToolResult | None:
        """A lever's PSSetMeta after its checks: the dry run's answer, or the
        call journalled as started and sent; None once the node took it, else
        the error result (the next reading shows `shows`)."""
        if config.dry_run:
            return tool_result(req, f"DRY RUN: would {plan}. {_NOTHING}")
        assert self._client is not None  # checked by _lever_refusal
        await self._calls.start(req)
        failed = await self._set_meta(self._client, enabled, wallet, price_nfil)
        if failed is None:
            return None
        log.warning("agent %s: %s: PSSetMeta failed", req.agent_id, req.name)
        return tool_result(
            req,
            f"The node did not take the change ({failed}); the next market reading shows "
            f"{shows}. No ask was withdrawn.",
            error=True,
        )

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
        history = self._history
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

    async def set_price(self, req: FleetToolRequest, _: ToolCallRecord | None) -> ToolResult:
        """The tool `set_ask_price`'s work (journalled by the caller)."""
        args = lever_input(SetAskPriceInput, req.input)
        opened = await self._open(req, args)
        if isinstance(opened, ToolResult):
            return opened
        config, client, meta = opened
        assert isinstance(args, SetAskPriceInput)
        change = price_change(args, req.agent_id, config.market_policy())
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
        unsent = await self._send(
            req, config, plan, meta.enabled, meta.wallet, change.price_nfil, "the price it has"
        )
        if unsent is not None:
            return unsent
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

    async def set_requests(self, req: FleetToolRequest, _: ToolCallRecord | None) -> ToolResult:
        """The tool `set_requests`'s work (journalled by the caller)."""
        args = lever_input(SetRequestsInput, req.input)
        opened = await self._open(req, args)
        if isinstance(opened, ToolResult):
            return opened
        config, client, meta = opened
        assert isinstance(args, SetRequestsInput)
        change = requests_change(args, req.agent_id, config.market_policy())
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
        unsent = await self._send(
            req, config, plan, change.enabled, meta.wallet, meta.price_nfil, "whether it asks"
        )
        if unsent is not None:
            return unsent
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
