"""The simulator as an HTTP service: `SimServer` for tests, `serve` for the CLI.

Served by uvicorn and Starlette (the console's stack) in a background thread
with its own event loop (`ThreadedServer`); the Starlette app
(`simulator.http_app`) hands each request to `SimApi` on a thread pool,
every request calling into the one `Market` behind its lock. Responses always
carry a Content-Length, so HTTP/1.1 keep-alive works for httpx and requests
alike, and JSON is sent as exactly ``application/json`` (the vastai CLI
compares the header verbatim).

Next to the API, a `ProverGateway` listens on one port per rented instance for
its prover's status (the instance row maps it), `CuzkHosts` serves each
router-mode machine's cuzk behind its TLS front on another, and with a `state_path` the
market is restored at start, saved every few seconds while it changes, and
saved when the server stops.
"""

from __future__ import annotations

import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from .api import SimApi
from .control import DrainAnswer
from .curio.web import CurioWeb
from .cuzk_hosts import CuzkHosts
from .demand import DemandConfig
from .gateway import ProverGateway
from .http_app import create_app
from .market import DEFAULT_OFFERS, Market
from .persist import load_state, save_state
from .snark_market import FleetProver, MarketConfig, SnarkMarket
from .threaded import ThreadedServer

__all__ = ["DEFAULT_API_KEY", "DEFAULT_STATE_PATH", "SimServer", "serve"]

_log = logging.getLogger(__name__)

#: The key a simulator accepts unless told otherwise.
DEFAULT_API_KEY = "sim-api-key"
#: Where `fleet-agent sim` and `fleet-agent up` keep the market between runs.
DEFAULT_STATE_PATH = Path("var/sim-state.json")
#: What stops `serve` (each raises KeyboardInterrupt in the main thread).
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: Real seconds between two saves of a changing market.
_SAVE_EVERY_S = 2.0
# Threads for the API's synchronous calls. The stdlib server had one per
# connection, unbounded; hangs and create delays each hold one for seconds
# while a fleet keeps polling, so the pool is wide (threads start on demand).
_API_THREADS = 256


class SimServer:
    """A running simulator on 127.0.0.1 (port 0 = any free port).

    ``with SimServer(seed=1, speed=0, scenario="ideal") as sim: ...`` starts it;
    `url` is the origin to give the client, `market` the model to drive.
    `offers` is the market's size (10,000 like vast.ai's; tests that are not
    about the market's size ask for a few hundred), `rate_limits` switches
    vast.ai's documented limits (on unless a test is not about pacing), and
    `state_path` keeps the market across restarts (None: nothing is saved).
    `demand` starts the work source's demand model (simulator/demand.py).
    `snark_market` runs the Snark Market around the operator's Curio node on
    the market's clock (simulator/snark_market/), served by a Curio
    stand-in at `curio_url` (simulator/curio/web.py); with its
    ``prover="fleet"`` the node proves on the machines rented here (then
    without `demand`: the machines have one work source).
    """

    def __init__(
        self,
        seed: int = 0,
        speed: float = 1.0,
        api_key: str = DEFAULT_API_KEY,
        scenario: str = "realistic",
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        start_epoch: float | None = None,
        page_size: int = 25,
        offers: int = DEFAULT_OFFERS,
        rate_limits: bool = True,
        state_path: str | Path | None = None,
        demand: DemandConfig | None = None,
        snark_market: MarketConfig | None = None,
    ) -> None:
        self.api_key = api_key
        self.state_path = Path(state_path) if state_path is not None else None
        self.gateway = ProverGateway(
            host, self._prover_answer, self._prover_drain, self._hostile_drain_sent
        )
        #: Router-mode machines' cuzk behind their fronts (simulator/cuzk_hosts.py).
        self.cuzk_hosts = CuzkHosts(host)
        self.market = Market(
            seed=seed,
            speed=speed,
            scenario_name=scenario,
            start_epoch=start_epoch,
            page_size=page_size,
            offer_count=offers,
            rate_limits=rate_limits,
            public_host=host,
            port_allocator=self.gateway.open,
            port_release=self.gateway.close,
            cuzk_hosts=self.cuzk_hosts,
        )
        self.cuzk_hosts.bind(
            self.market.clock,
            self.market.cuzk_views,
            self.market.cuzk_proved,
            self.market.cuzk_died,
        )
        #: Whether the market was restored from `state_path`.
        self.restored = False
        if self.state_path is not None:
            self.restored = load_state(self.market, self.state_path)
        if demand is not None:  # not in the state file: it starts afresh
            self.market.set_demand(demand)
        #: The Snark Market and the Curio node serving it (None: not simulated).
        self.snark_market: SnarkMarket | None = None
        self.curio_web: CurioWeb | None = None
        if snark_market is not None:  # not in the state file either: it starts afresh
            self.snark_market = _snark_market(self.market, snark_market, seed)
            self.curio_web = CurioWeb(self.snark_market, host)
        self._stopping = threading.Event()
        self._api = SimApi(self.market, api_key, wait=self._stopping.wait)
        self._host, self._port = host, port
        self._http: ThreadedServer | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._saver: threading.Thread | None = None

    def _prover_answer(self, instance_id: int) -> Any:
        return self.market.prover_endpoint(instance_id)

    def _prover_drain(self, instance_id: int, token: str) -> DrainAnswer:
        try:
            return self.market.drain_prover(instance_id, token)
        except KeyError:
            return 404, ""

    def _hostile_drain_sent(self, sent: int, seconds: float) -> None:
        self.market.hostile_drain_sent(sent, seconds)

    def save(self) -> None:
        """Write the market to `state_path` now (nothing without one)."""
        if self.state_path is not None:
            save_state(self.market, self.state_path)

    def _save_loop(self) -> None:
        # Saving takes the market's lock for a moment; every few seconds is
        # often enough for a restart to find what was rented.
        while not self._stopping.wait(_SAVE_EVERY_S):
            try:
                self.save()
            except OSError:
                _log.exception("could not save the simulator state to %s", self.state_path)

    @property
    def url(self) -> str:
        """The origin, e.g. ``http://127.0.0.1:41234`` (what ``--url`` takes)."""
        if self._http is None:
            raise RuntimeError("the simulator is not started")
        host, port = self._http.address
        return f"http://{host}:{port}"

    @property
    def curio_url(self) -> str:
        """The Curio stand-in's origin: its web RPC at ``/api/webrpc/v0``, its
        metrics at ``/debug/metrics`` (both FLEET_DEMAND_URL and _METRICS_URL)."""
        if self.curio_web is None or self._http is None:
            raise RuntimeError("the simulator runs no Snark Market, or is not started")
        return self.curio_web.url

    def start(self) -> Self:
        """Bind and serve in a background thread."""
        if self._http is not None:
            return self
        self._stopping.clear()
        executor = ThreadPoolExecutor(_API_THREADS, thread_name_prefix="vast-sim-api")
        http = ThreadedServer(
            create_app(self._api, self._stopping, executor),
            self._host,
            self._port,
            name="vast-sim",
            server_header="vast-sim/1",
        )
        try:
            http.start()
        except BaseException:
            executor.shutdown(wait=False)
            raise
        self._http, self._executor = http, executor
        self.gateway.start()
        self.cuzk_hosts.start()
        if self.curio_web is not None:
            self.curio_web.start()
        if self.state_path is not None:
            self._saver = threading.Thread(
                target=self._save_loop, name="vast-sim-save", daemon=True
            )
            self._saver.start()
        _log.info("vast.ai simulator listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Stop serving and release the port; a pending hang answers 503."""
        http, executor = self._http, self._executor
        if http is None:
            return
        # Set first: create delays and hangs waiting in pool threads return at
        # once, so uvicorn's graceful shutdown has no request left to wait for.
        self._stopping.set()
        http.begin_stop()
        self.gateway.stop()  # meanwhile
        self.cuzk_hosts.stop()
        if self.curio_web is not None:
            self.curio_web.stop()
        http.stop()
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
        if self._saver is not None:
            self._saver.join(timeout=5)
            self._saver = None
        self._http = self._executor = None
        self.save()

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted."""
        self.start()
        try:
            self._stopping.wait()
        finally:
            self.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _snark_market(market: Market, config: MarketConfig, seed: int) -> SnarkMarket:
    """The Snark Market on `market`'s clock. With ``prover="fleet"`` its node
    proves on `market`'s machines: one lock for both (the market's), and the
    market runs it up to its clock at every sync, before it looks at a
    machine (simulator/demand_market.py ``set_fleet_work``)."""
    if config.prover != "fleet":
        return SnarkMarket(config, clock=market.clock.now, seed=seed)
    fleet = FleetProver(market.machine_views)
    snark = SnarkMarket(config, clock=market.clock.now, seed=seed, prover=fleet, lock=market.lock)
    market.set_fleet_work(snark)
    return snark


def serve(
    host: str = "127.0.0.1",
    port: int = 0,
    seed: int = 0,
    speed: float = 1.0,
    api_key: str = DEFAULT_API_KEY,
    scenario: str = "realistic",
    *,
    offers: int = DEFAULT_OFFERS,
    rate_limits: bool = True,
    state_path: str | Path | None = DEFAULT_STATE_PATH,
    demand: DemandConfig | None = None,
    snark_market: MarketConfig | None = None,
) -> None:
    """Run a simulator until Ctrl-C or SIGTERM (for ``fleet-agent sim --port PORT``)."""
    sim = SimServer(
        seed=seed,
        speed=speed,
        api_key=api_key,
        scenario=scenario,
        host=host,
        port=port,
        offers=offers,
        rate_limits=rate_limits,
        state_path=state_path,
        demand=demand,
        snark_market=snark_market,
    )
    # Ctrl-C or SIGTERM at any moment once the server answers (even before
    # serve_forever is reached) stops it cleanly, saving its state. Installed
    # here, not inherited: a shell starts a background job with SIGINT
    # ignored, and Python then leaves it so, which made the simulator deaf
    # to Ctrl-C sent by a supervisor or a test that was itself in the
    # background; and a plain SIGTERM would end it without the last save.
    # Only the main thread may set handlers; a caller that runs us in another
    # thread stops us itself.
    previous = (
        {sig: signal.signal(sig, signal.default_int_handler) for sig in _STOP_SIGNALS}
        if threading.current_thread() is threading.main_thread()
        else {}
    )
    try:
        sim.start()
        # The default key is a public constant, not a secret; a chosen one is not echoed.
        key_hint = f"VAST_API_KEY={api_key}" if api_key == DEFAULT_API_KEY else "the key you chose"
        kept = (
            f"; state {'restored from' if sim.restored else 'kept in'} {sim.state_path}"
            if sim.state_path is not None
            else ""
        )
        limits = "on" if rate_limits else "OFF"
        print(
            f"vast.ai simulator on {sim.url} (scenario={scenario}, seed={seed}, speed={speed}, "
            f"{len(sim.market.offer_ids())} offers, rate limits {limits}{kept}). "
            f"Use VAST_API_URL={sim.url} and {key_hint}. Ctrl-C stops.",
            flush=True,
        )
        if sim.curio_web is not None:
            print(
                f"Curio stand-in (Snark Market) on {sim.curio_url}: "
                f"FLEET_DEMAND_URL={sim.curio_url} FLEET_DEMAND_METRICS_URL={sim.curio_url}",
                flush=True,
            )
        sim.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
