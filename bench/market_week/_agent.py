"""The week's agent paths: the real agent on the Snark Market of a
`SimServer`, on the frozen-clock harness of bench/demand_day/ (whose
modules import the worker, so they are imported only when a path runs).

Touches: an in-process vast.ai simulator with the Snark Market, its node
proving on the machines the agent rents (`MarketConfig(prover="fleet")`:
simulator/snark_market/fleet_prover.py), the time-skipping test server
under libfaketime, a worker with the agent, the fake Messages API on the
LLM path, and a scratch SQLite store in a temporary directory.

The node is set up as the local stack sets up its own
(starter/stack/market.py `set_up_node`): the wallet set, requests off, the
ask at `start_price_nfil`, the wallet credited with the setup's challenge
proofs. The paths (`AGENT_PATHS`):

- ``autopilot``: demand mode reading the node (`CurioSource`) with the
  market mode on (`market_mode=snark`: the monitor reads the business
  through `MarketActivities(CurioMarket(...))`, the autopilot's market
  rules turn requests on once a machine proves and set the price within
  the stack's range, the slots bound the fleet);
- ``llm``: the same with the real anthropic client against the fake
  Messages API, which answers with the autopilot's decisions read from the
  prompt (testkit/fakes/autopilot_llm.py): the LLM path's plumbing at the
  autopilot's judgement;
- ``demand``: today's demand mode without prices (market mode off, no
  market activities): the agent never touches the node, so the harness
  does the operator's part, turning requests on at the first step a
  rented machine proves, the ask left at `start_price_nfil`.

The clocks: the fleet, demand and market activities date what they see by
the simulator's clock (`sim.market.now`), as the demand day's fleet
activities do, and `Lockstep` moves the market and the server's workflow
time together.

A day's figures come from the simulator's truth, as the fixed path's do:
the node's account at the market (paid proofs, vouchers, challenge
proofs, penalties, late answers, slots sampled at each step), the vast.ai
simulator's billing (rental and transfer, GET /_sim/charges) and, on the
LLM path, the store's priced runs.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simulator.curio.fil import ATTO_PER_FIL, ATTO_PER_NFIL
from starter.stack.demand import suggested_max_target
from starter.stack.market import STACK_MIN_TARGET, STACK_PRICE_RANGE_NFIL

from ._market_only import DAY_S, WALLET, WEEK_EPOCH, WeekSetup

__all__ = ["AGENT_PATHS", "AgentPath", "NotAvailable", "availability", "run_agent_week"]

#: The stack's choices (starter/stack/market.py): one machine's worth held
#: (its first proof lets the agent ask for work) and the ask price range a
#: fresh agent may set.
MIN_TARGET = STACK_MIN_TARGET
PRICE_RANGE_NFIL = STACK_PRICE_RANGE_NFIL
#: The Curio stand-in's market price and FIL/USD paths (simulator/curio/web.py).
PRICE_PATH = "/v0/proofs/client/current-price"
FIL_USD_QUERY = "/api/v3/simple/price?ids=filecoin&vs_currencies=usd"


class NotAvailable(RuntimeError):
    """A path whose pieces are not there yet; the message says which."""


@dataclass(frozen=True, slots=True)
class AgentPath:
    """An agent path: its agent settings and what it runs on."""

    settings: dict[str, Any]
    llm: bool = False
    #: It reads the business (the market activities) and sets prices and
    #: requests; else the harness turns requests on (the operator's part).
    market: bool = True


#: Demand mode as the demand day runs it (bench/demand_day/_day.py `PATHS`),
#: the least target the stack's; `max_target` is the stack's
#: (starter/stack/demand.py `suggested_max_target`: twice the curve's peak),
#: set by `run_agent_week` from the setup's curve.
_DEMAND: dict[str, Any] = {
    "max_instances": 60,
    "max_fleet_dph": 60.0,
    "max_instance_dph": 3.0,
    "monitor_poll_seconds": 60,
    "heartbeat_seconds": 300,
    "target_mode": "demand",
    "min_target": MIN_TARGET,
    "demand_headroom": 0.2,
    "demand_hysteresis": 0.15,
    "demand_lower_after_minutes": 30.0,
    "demand_lead_minutes": 30.0,
    "target_proofs_per_hour": MIN_TARGET,
}
#: The market mode on top (docs/operations/snark-market.md, "Selling proofs on the Snark
#: Market"); the challenges and dollars per FIL are the setup's.
_MARKET: dict[str, Any] = {
    "market_mode": "snark",
    "market_min_price_nfil": PRICE_RANGE_NFIL[0],
    "market_max_price_nfil": PRICE_RANGE_NFIL[1],
    "market_on_loss": "lower",
}

AGENT_PATHS: dict[str, AgentPath] = {
    "autopilot": AgentPath({**_DEMAND, **_MARKET}),
    "llm": AgentPath({**_DEMAND, **_MARKET}, llm=True),
    "demand": AgentPath(dict(_DEMAND), market=False),
}


def availability(path: str) -> str | None:
    """None when `path` can run here; else why not, in one line."""
    spec = AGENT_PATHS[path]
    missing = []
    try:
        agents = importlib.import_module("testkit.agents")
    except ImportError as exc:
        # The message without the file's path (it names the module already).
        missing.append(f"the worker does not import ({str(exc).split(' (')[0]})")
    else:
        if spec.market and "market" not in inspect.signature(agents.running_worker).parameters:
            missing.append("the worker has no market activities (running_worker(market=...))")
    try:
        servers = importlib.import_module("testkit.servers")
        servers.faketime_library()
    except (ImportError, RuntimeError) as exc:
        missing.append(f"no frozen clock ({exc})")
    return "; ".join(missing) or None


def agent_settings(path: str, setup: WeekSetup) -> dict[str, Any]:
    """The agent's config on `path` for `setup`."""
    spec = AGENT_PATHS[path]
    settings = dict(spec.settings) | {"max_target": float(suggested_max_target(setup.demand()))}
    if spec.market:
        settings |= {"market_challenges": setup.challenges, "fil_usd": setup.fil_usd}
    return settings


async def run_agent_week(
    path: str,
    setup: WeekSetup,
    seed: int,
    *,
    start_price_nfil: int,
    step: int = 120,
    keep_store: Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The agent on `path` for `setup.days` days of the market; the days'
    figures as the fixed path reports them. `NotAvailable` when a piece is
    missing (`availability`). `keep_store`: a file to copy the week's store
    to (the runs' messages and tool calls, the demand and market points).
    `overrides`: agent config keys over the path's (`--set`)."""
    why = availability(path)
    if why is not None:
        raise NotAvailable(why)
    # Imported here: these import the worker (module doc).
    from activities.demand import DemandActivities
    from activities.demand_sources import CurioSource
    from activities.fleet import FleetActivities
    from activities.market import MarketActivities
    from activities.market_sources import CurioMarket
    from bench.demand_day._lockstep import Lockstep
    from bench.market_day._drive import until_acted
    from bench.market_day.day import _keep
    from fleet_agent.autopilot.provider import AutopilotProvider
    from fleet_agent.store import Store
    from fleet_agent.vast.client import VastClient
    from fleet_agent.vast.pacing import NO_PACING
    from simulator.server import SimServer
    from testkit.agents import running_worker
    from testkit.fakes import FakeAnthropic
    from testkit.fakes.autopilot_llm import autopilot_reply
    from testkit.servers import start_time_skipping_env

    from ._market_only import book_prover

    spec = AGENT_PATHS[path]
    settings = agent_settings(path, setup) | (overrides or {})
    prover = book_prover()
    config = dataclasses.replace(setup.market_config(0), prover="fleet", fil_usd=setup.fil_usd)
    days: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic() as fake:
        fake.set_responder(autopilot_reply)
        if spec.llm:
            os.environ.update(fake.env())
        else:
            os.environ.pop("ANTHROPIC_API_KEY", None)
        store = Store(f"sqlite:///{Path(tmp) / 'fleet.db'}")
        store.create_all()
        env = await start_time_skipping_env(frozen=True)
        try:
            with SimServer(
                seed=seed,
                speed=0,
                scenario="realistic",
                rate_limits=False,
                start_epoch=WEEK_EPOCH,
                snark_market=config,
            ) as sim:
                market = sim.snark_market
                assert market is not None and sim.curio_url
                origin = sim.curio_url
                # The operator's part (the agent never sets the wallet):
                # requests off until a machine proves (module doc).
                market.set_meta(False, WALLET, start_price_nfil * ATTO_PER_NFIL)
                clocks = Lockstep(env, sim, frozen=True)
                await clocks.start()

                def sim_now() -> datetime:
                    return datetime.fromtimestamp(sim.market.now(), UTC)

                async with VastClient(
                    sim.api_key, sim.url, timeout=5, backoff_base=0.01, pacing=NO_PACING
                ) as vast:
                    fleet = FleetActivities(vast, prover, store=store, clock=sim.market.now)
                    demand = DemandActivities(CurioSource(origin, origin, clock=sim_now))
                    business = None
                    if spec.market:
                        client = CurioMarket(
                            origin, origin, origin + PRICE_PATH, origin + FIL_USD_QUERY
                        )
                        business = MarketActivities(client, clock=sim.market.now)
                    async with running_worker(
                        env.client,
                        store,
                        provider=None if spec.llm else AutopilotProvider(),
                        fleet=fleet,
                        demand=demand,
                        market=business,
                    ) as h:
                        handle = await h.start_agent(agent_id=f"market-week-{seed}", **settings)
                        clocks.watch(handle)
                        moved = await until_acted(env, sim, handle, 0, step, clocks.move)
                        watch = _Watch(sim, operator=not spec.market, price=start_price_nfil)
                        before = _truth(sim, store, handle.id, fake, spec.llm)
                        for day in range(setup.days):
                            left = DAY_S - (moved if day == 0 else 0.0)
                            watch.new_day()
                            for i in range(max(1, round(left / step))):
                                await clocks.advance(step, step)
                                watch.sample()
                                if (i + 1) % round(3600 / step) == 0:
                                    watch.progress(path, seed, day + 1)
                            after = _truth(sim, store, handle.id, fake, spec.llm)
                            days.append(_day(day + 1, before, after, watch, setup.fil_usd))
                            before = after
        finally:
            await env.shutdown()
            store.dispose()
            if keep_store is not None:
                _keep(Path(tmp) / "fleet.db", keep_store)
    return days


class _Watch:
    """What the harness samples at each step: the node's slots in use (the
    most, and samples over its slots), its ask price and requests, the
    machines proving; with `operator`, it turns requests on at the first
    step a rented machine proves (the demand path: the operator's part)."""

    def __init__(self, sim: Any, *, operator: bool, price: int) -> None:
        self.sim = sim
        self.operator = operator
        self.price = price
        #: Sim seconds from the week's start at which requests were first on.
        self.requests_on_s: float | None = None
        self.proving = 0
        self.started = time.monotonic()
        self.new_day()

    def new_day(self) -> None:
        self.peak = self.over = self.samples = self.on = 0
        self.peak_proving = 0
        self.price_sum = 0.0

    def progress(self, path: str, seed: int, day: int) -> None:
        """One line on stderr an hour: where the day stands, and its wall time."""
        market = self.sim.snark_market
        acc = market.node_account()
        hour = (self.sim.market.now() - WEEK_EPOCH) / 3600 % 24
        print(
            f"  {path} seed {seed} day {day} {hour:4.1f} h: requests"
            f" {'on' if market.node.meta.enabled else 'off'},"
            f" ask {market.node.meta.pprice_atto / ATTO_PER_NFIL / 1e6:.2f} mFIL,"
            f" machines proving {self.proving}, slots {acc.used if acc else 0}/"
            f"{acc.slots if acc else 0}, paid {acc.paid_proofs if acc else 0},"
            f" penalties {acc.penalties if acc else 0},"
            f" {time.monotonic() - self.started:.0f} s",
            file=sys.stderr,
            flush=True,
        )

    def sample(self) -> None:
        sim = self.sim
        market = sim.snark_market
        now = sim.market.now()
        proving = self.proving = sum(1 for v in sim.market.machine_views(now) if v.pulls)
        meta = market.node.meta
        if self.operator and not meta.enabled and proving:
            market.set_meta(True, WALLET, self.price * ATTO_PER_NFIL)
        if meta.enabled and self.requests_on_s is None:
            self.requests_on_s = now - WEEK_EPOCH
        acc = market.node_account()
        self.samples += 1
        self.on += meta.enabled
        self.peak_proving = max(self.peak_proving, proving)
        self.price_sum += meta.pprice_atto / ATTO_PER_NFIL
        if acc is not None:
            self.peak = max(self.peak, acc.used)
            self.over += acc.used > acc.slots


def _truth(sim: Any, store: Any, agent_id: str, fake: Any, llm: bool) -> dict[str, float]:
    """The running totals a day's figures are the differences of."""
    from bench.market_day.day import llm_totals

    acc = sim.snark_market.node_account()
    charges = sim.market.charges()
    counters = sim.market.state()["counters"]
    bandwidth = sum(float(r.get("bandwidth_usd", 0.0)) for r in charges["instances"])
    return {
        "paid_proofs": acc.paid_proofs,
        "earned_atto": acc.cumulative_atto,
        "challenges_done": acc.challenges_done,
        "penalties": acc.penalties,
        "gone": acc.gone,
        "withdrawals": acc.withdrawals,
        "slots": acc.slots,
        "usd": float(charges["total_usd"]),
        "transfer_usd": bandwidth,
        "llm_usd": float(llm_totals(store, agent_id, fake)["usd"]) if llm else 0.0,
        "rentals": counters["creates"],
        "releases": counters["destroys"],
        "at": time.monotonic(),
    }


def _day(
    day: int, before: dict[str, float], after: dict[str, float], watch: _Watch, fil: float
) -> dict[str, Any]:
    delta = {k: after[k] - before[k] for k in after}
    revenue_fil = delta["earned_atto"] / ATTO_PER_FIL
    transfer = delta["transfer_usd"]
    rental = delta["usd"] - transfer
    cost = rental + transfer + delta["llm_usd"]
    paid = int(delta["paid_proofs"])
    samples = max(1, watch.samples)
    return {
        "day": day,
        "paid_proofs": paid,
        "revenue_fil": round(revenue_fil, 6),
        "revenue_usd": round(revenue_fil * fil, 4),
        "rental_usd": round(rental, 4),
        "transfer_usd": round(transfer, 4),
        "llm_usd": round(delta["llm_usd"], 4),
        "profit_usd": round(revenue_fil * fil - cost, 4),
        "usd_per_proof": round(cost / paid, 5) if paid else None,
        "challenge_proofs": int(delta["challenges_done"]),
        "penalties": int(delta["penalties"]),
        "late": int(delta["gone"]),
        "withdrawals": int(delta["withdrawals"]),
        "slots": int(after["slots"]),
        "peak_slots_used": watch.peak,
        "over_slots": watch.over,
        "peak_machines_proving": watch.peak_proving,
        "requests_on_pct": round(100 * watch.on / samples, 1),
        "requests_first_on_s": watch.requests_on_s,
        "mean_ask_nfil": round(watch.price_sum / samples),
        "rentals": int(delta["rentals"]),
        "releases": int(delta["releases"]),
        "wall_s": round(delta["at"], 1),
    }
