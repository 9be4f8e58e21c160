"""The Curio stand-in's HTTP server: the web RPC, the metrics page, and the market's report.

Touches the socket it binds, a `SnarkMarket` (through `ProofshareRpc`) and a
thread that runs the market up to the clock once a real second, so work
proved outside the scheduler (`AsyncProver`) moves on without a reader.
Served by uvicorn and Starlette in a thread of its own (`ThreadedServer`,
as the simulator's API). One origin serves what Curio serves on two ports:

- ``/api/webrpc/v0``: go-jsonrpc over HTTP (simulator/curio/jsonrpc.py), any
  method (go-jsonrpc checks none), ``Content-Type: application/json``;
  Curio's GUI port (``GuiAddress``, default 0.0.0.0:4701;
  web/srv.go, web/api/routes.go, web/api/webrpcporep/routes.go). The GUI's
  CORS layer answers every ``OPTIONS`` with 204 (web/srv.go); an unknown
  path is 404 ``404 Not Found`` (its static-file fallback). WebSocket
  upgrades are not served.
- ``/debug/metrics``: the ``curio_psvc_proofshare_*`` exposition; Curio's
  API port (``--listen``, default 0.0.0.0:12300; cmd/curio/rpc/rpc.go).
- ``/v0/proofs/client/current-price`` (not Curio's: the market service's,
  ``https://mainnet.snass.fsp.sh/v0/proofs``, curio lib/proofsvc/clientctl.go)
  and ``/api/v3/simple/price`` (CoinGecko's): the market's public price and
  FIL in dollars, ``GET`` (simulator/snark_market/public.py), so one origin
  serves everything the agent reads of the market.
- ``/_sim/snark-market`` (not Curio's): ``GET`` the market's report;
  ``POST`` ``{"hold": bool, "gpus": n, "grant": {"wallet": w, "challenges": n}}``
  (any of them) to change it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from typing import Any, Self, TypeVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from simulator.snark_market import SnarkMarket
from simulator.snark_market.public import (
    FIL_USD_CONTENT_TYPE,
    PRICE_CONTENT_TYPE,
    current_price_body,
    simple_price_body,
)
from simulator.threaded import ThreadedServer

from .jsonrpc import MAX_REQUEST_BYTES, serve
from .proofshare_rpc import ProofshareRpc
from .webrpc import METRICS_CONTENT_TYPE

__all__ = ["FIL_USD_PATH", "METRICS_PATH", "PRICE_PATH", "RPC_PATH", "CurioWeb"]

RPC_PATH = "/api/webrpc/v0"
METRICS_PATH = "/debug/metrics"
PRICE_PATH = "/v0/proofs/client/current-price"
FIL_USD_PATH = "/api/v3/simple/price"
CONTROL_PATH = "/_sim/snark-market"
_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]
_T = TypeVar("_T")


class CurioWeb:
    """The server (module doc); `url` once started."""

    def __init__(
        self, market: SnarkMarket, host: str = "127.0.0.1", port: int = 0, *, pulse_s: float = 1.0
    ) -> None:
        self.market = market
        self.rpc = ProofshareRpc(market)
        self._methods = self.rpc.methods()
        self._http = ThreadedServer(
            self._app(), host, port, name="curio-web", server_header="curio-sim/1"
        )
        self._pulse_s = pulse_s
        self._stop = threading.Event()
        self._pulse: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._http.address
        return f"http://{host}:{port}"

    def start(self) -> Self:
        self._http.start()
        if self._pulse_s > 0 and self._pulse is None:
            self._stop.clear()
            self._pulse = threading.Thread(target=self._beat, name="curio-pulse", daemon=True)
            self._pulse.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._pulse is not None:
            self._pulse.join(timeout=5)
            self._pulse = None
        self._http.begin_stop()
        self._http.stop()

    def _beat(self) -> None:
        while not self._stop.wait(self._pulse_s):
            self.market.sync()

    # ---------------------------------------------------------------- app

    def _app(self) -> Starlette:
        async def endpoint(request: Request) -> Response:
            if request.method == "OPTIONS":
                return Response(status_code=204)
            path = request.url.path
            if path == RPC_PATH:
                body = await _read(request)
                status, payload = await _off_loop(lambda: serve(body, self._methods))
                return _bytes(payload, "application/json", status)
            if path == METRICS_PATH and request.method in ("GET", "HEAD"):
                text = await _off_loop(self.rpc.metrics)
                return _bytes(text.encode(), METRICS_CONTENT_TYPE)
            if path == PRICE_PATH and request.method in ("GET", "HEAD"):
                price_nfil, _, now = await _off_loop(self.market.public_prices)
                return _bytes(current_price_body(price_nfil, now), PRICE_CONTENT_TYPE)
            if path == FIL_USD_PATH and request.method in ("GET", "HEAD"):
                _, fil_usd, _ = await _off_loop(self.market.public_prices)
                status, body = simple_price_body(request.query_params, fil_usd)
                return _bytes(body, FIL_USD_CONTENT_TYPE, status)
            if path == CONTROL_PATH and request.method == "GET":
                report = await _off_loop(self.market.report)
                return _bytes(json.dumps(report).encode(), "application/json")
            if path == CONTROL_PATH and request.method == "POST":
                try:
                    change = json.loads(await request.body() or b"{}")
                    await _off_loop(lambda: self._control(change))
                except (ValueError, TypeError, KeyError) as exc:
                    return _bytes(json.dumps({"error": str(exc)}).encode(), "application/json", 400)
                report = await _off_loop(self.market.report)
                return _bytes(json.dumps(report).encode(), "application/json")
            return _bytes(b"404 Not Found", "text/plain; charset=utf-8", 404)

        return Starlette(routes=[Route("/{path:path}", endpoint, methods=_METHODS)])

    def _control(self, change: Any) -> None:
        if not isinstance(change, dict) or set(change) - {"hold", "gpus", "grant"}:
            raise ValueError('body is {"hold": bool, "gpus": n, "grant": {"wallet", "challenges"}}')
        if "hold" in change:
            if not isinstance(change["hold"], bool):
                raise ValueError("hold is true or false")
            self.market.set_hold(change["hold"])
        if "gpus" in change:
            if isinstance(change["gpus"], bool) or not isinstance(change["gpus"], int):
                raise ValueError("gpus is an integer")
            self.market.set_gpus(change["gpus"])
        if "grant" in change:
            grant = change["grant"]
            self.market.grant_challenges(str(grant["wallet"]), int(grant["challenges"]))


async def _read(request: Request) -> bytes:
    """The body, up to one byte over go-jsonrpc's limit (what it reads)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            break
    return b"".join(chunks)


async def _off_loop(call: Callable[[], _T]) -> _T:
    # The market's lock may be held by the pulse thread: wait in a thread.
    return await asyncio.get_running_loop().run_in_executor(None, call)


def _bytes(payload: bytes, content_type: str, status: int = 200) -> Response:
    response = Response(payload, status_code=status)
    # Set verbatim: Starlette would add a charset to a media_type it is given.
    response.headers["content-type"] = content_type
    return response
