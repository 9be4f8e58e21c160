"""The market's client: the operator's Curio node (its web RPC and its
metrics), the market's current price and FIL in dollars, over HTTP.

Every read has the demand sources' limits (activities/demand_sources.py):
a deadline of `READ_TIMEOUT_S` for the whole of it, JSON answers up to 64
KB, no redirects (a 302 to 169.254.169.254 is an answer, not a hop), no
proxy from the environment, the metrics read line by line keeping only
``curio_psvc_proofshare_queue_count``. A read returns the answer, or one
line saying why there is none (our words: the source's text never passes
through); nothing raises for what a source answers or fails to.

The node's four methods are four JSON-RPC calls (``CurioWeb.PSGetMeta``,
``PSListAsks``, ``PSListQueue``, ``PSProviderLastPaymentsSummary``: no
parameters; web/api/webrpcporep/proofshare.go), made at once; a lever's
call (``PSSetMeta``, ``PSAskWithdraw``) is one more. The answers are
JSON-RPC envelopes, parsed by fleet_agent/market/parse.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from fleet_agent.demand.settings import DemandEnv
from fleet_agent.demand.sources import CURIO_METRICS_PATH, CURIO_QUEUE_COUNT, CURIO_RPC_PATH
from fleet_agent.fleet.prover_status import READ_TIMEOUT_S
from fleet_agent.market.settings import MarketEnv
from fleet_agent.untrusted import fence

from .demand_sources import (
    MAX_ANSWER,
    AnswerTooLarge,
    ReadFailed,
    http_client,
    read_body,
    read_json,
    read_metric_lines,
)

__all__ = [
    "NODE_METHODS",
    "CurioMarket",
    "Failed",
    "NodeAnswers",
    "host_of",
    "market_from_env",
    "rpc_error_text",
]

#: The reads of one observation, in `NodeAnswers`' order.
NODE_METHODS = (
    "CurioWeb.PSGetMeta",
    "CurioWeb.PSListAsks",
    "CurioWeb.PSListQueue",
    "CurioWeb.PSProviderLastPaymentsSummary",
)
_ERROR_CHARS = 200
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Failed:
    """A read that has no answer, and why (one line of ours)."""

    why: str


@dataclass(frozen=True, slots=True)
class NodeAnswers:
    """The node's answers (JSON-RPC envelopes, unchecked) and its metric lines."""

    meta: Any
    asks: Any
    queue: Any
    payments: Any
    metric_lines: list[str]


def host_of(url: str) -> str:
    """What a log line names of a URL: its host (a query may hold a key)."""
    return urlsplit(url).hostname or "?"


async def _guarded(read: Callable[[], Awaitable[_T]]) -> _T | Failed:
    """`read()` under the deadline, every failure one line of ours."""
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            return await read()
    except (TimeoutError, httpx.TimeoutException):
        return Failed(f"no answer within {READ_TIMEOUT_S:g} s")
    except AnswerTooLarge:
        return Failed(f"the answer is larger than {MAX_ANSWER // 1024} KB")
    except ReadFailed as exc:
        return Failed(str(exc))
    except (httpx.HTTPError, ValueError) as exc:
        return Failed(f"connection failed ({type(exc).__name__})")


def rpc_error_text(answer: Any) -> str | None:
    """A JSON-RPC error's message, fenced as data (fleet_agent/untrusted.py),
    or None when `answer` is not an error."""
    if not isinstance(answer, dict) or answer.get("error") is None:
        return None
    error = answer["error"]
    message = error.get("message") if isinstance(error, dict) else None
    return fence(message if isinstance(message, str) else "no message", _ERROR_CHARS)


class CurioMarket:
    """The operator's node at `origin` (its GUI: ``http://10.0.0.5:4701``)
    and `metrics_origin` (``http://10.0.0.5:12300``), the market's price at
    `price_url`, FIL in dollars at `fil_usd_url` (None: not read)."""

    name = "curio"

    def __init__(
        self, origin: str, metrics_origin: str, price_url: str | None, fil_usd_url: str | None
    ) -> None:
        self._rpc = origin.rstrip("/") + CURIO_RPC_PATH
        self._metrics = metrics_origin.rstrip("/") + CURIO_METRICS_PATH
        self._price_url = price_url
        self._fil_usd_url = fil_usd_url

    async def observe(self, fil_usd: bool = True) -> tuple[NodeAnswers | Failed, Any, Any]:
        """One observation's reads at once, on one client (a client's TLS
        set-up is most of a read's time): the node (`read_node`), the
        market's price and, with `fil_usd`, FIL/USD (`read_price`,
        `read_fil_usd`), each under its own deadline."""
        async with http_client() as http:
            node, price, usd = await asyncio.gather(
                _guarded(lambda: self._node(http)),
                self._get(http, self._price_url, "market price"),
                self._get(http, self._fil_usd_url if fil_usd else None, "FIL/USD"),
            )
        return node, price, usd

    async def read_node(self) -> NodeAnswers | Failed:
        """The four methods' answers and the metric lines, or why not."""

        async def read() -> NodeAnswers:
            async with http_client() as http:
                return await self._node(http)

        return await _guarded(read)

    async def call(self, method: str, params: list[Any]) -> Any:
        """One method's answer (the envelope, unchecked), or `Failed`."""

        async def read() -> Any:
            async with http_client() as http:
                return await self._call(http, method, params, 1)

        return await _guarded(read)

    async def read_price(self) -> Any:
        """The market's price answer (JSON, unchecked), `Failed`, or None (no URL)."""
        async with http_client() as http:
            return await self._get(http, self._price_url, "market price")

    async def read_fil_usd(self) -> Any:
        """The FIL/USD answer (JSON, unchecked), `Failed`, or None (no URL)."""
        async with http_client() as http:
            return await self._get(http, self._fil_usd_url, "FIL/USD")

    async def _node(self, http: httpx.AsyncClient) -> NodeAnswers:
        answers = await asyncio.gather(
            *(self._call(http, m, [], i) for i, m in enumerate(NODE_METHODS, 1)),
            read_metric_lines(http, self._metrics, (CURIO_QUEUE_COUNT,)),
        )
        meta, asks, queue, payments, lines = answers
        return NodeAnswers(meta, asks, queue, payments, lines)

    async def _get(self, http: httpx.AsyncClient, url: str | None, what: str) -> Any:
        if url is None:
            return None

        async def read() -> Any:
            headers = {"Accept": "application/json"}
            async with http.stream("GET", url, headers=headers) as resp:
                if resp.status_code != 200:
                    raise ReadFailed(f"{what}: HTTP {resp.status_code}")
                return read_json(await read_body(resp))

        return await _guarded(read)

    async def _call(
        self, http: httpx.AsyncClient, method: str, params: list[Any], request_id: int
    ) -> Any:
        call = {"jsonrpc": "2.0", "method": method, "params": params, "id": request_id}
        async with http.stream("POST", self._rpc, json=call) as resp:
            if resp.status_code != 200:
                raise ReadFailed(f"{method.removeprefix('CurioWeb.')}: HTTP {resp.status_code}")
            return read_json(await read_body(resp))


def market_from_env(market: MarketEnv, demand: DemandEnv) -> CurioMarket | None:
    """The client `market` names (None: FLEET_MARKET_SOURCE=none), on the
    node `demand` reads (both checked when loaded)."""
    if market.source != "curio" or not demand.url or not demand.metrics_url:
        return None
    return CurioMarket(demand.url, demand.metrics_url, market.price_url, market.fil_usd_url)
