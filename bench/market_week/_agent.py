"""The week's agent paths: the real agent on the Snark Market of a
`SimServer`, on the frozen-clock harness of bench/demand_day/ (whose
modules import the worker, so they are imported only when a path runs).

Touches: an in-process vast.ai simulator with the Snark Market
(`snark_market=WeekSetup.market_config()`), the time-skipping test server,
a worker with the agent, the fake Messages API on the LLM path, and a
scratch SQLite store in a temporary directory.

The paths (`AGENT_PATHS`):

- ``autopilot``: demand mode with the market mode on (`market_mode=snark`:
  the monitor reads the business, the autopilot's market rules set the
  price, requests and the fleet);
- ``llm``: the same with the real anthropic client against the fake
  Messages API, which answers with the autopilot's decisions
  (testkit/fakes/autopilot_llm.py): the LLM path's plumbing at the
  autopilot's judgement;
- ``demand``: today's demand mode without prices (market mode off), the
  node's price left at `start_price_nfil`.

Each needs pieces that other branches build; `availability` names what is
missing, and the harness reports the path as "not available: <why>"
instead of running it:

- the worker must import (the workflows and activities of the market mode);
- the Snark Market's node must prove on the machines the agent rents from
  the simulator (a ``FleetProver`` in simulator/snark_market/, which the
  `SimServer` wires when it runs the market): without it the agent's fleet
  proves none of the market's work;
- the market paths: the worker's market activities (`running_worker` takes
  ``market=``, the reader of the node's business);
- the frozen clock: libfaketime (testkit/servers.py `faketime_library`).

A day's figures come from the simulator's truth, as the fixed path's do:
the node's account at the market (paid proofs, vouchers, challenge
proofs, penalties, slots sampled at each step), the vast.ai simulator's
billing (rental and transfer, GET /_sim/charges) and, on the LLM path, the
store's priced runs.
"""

from __future__ import annotations

import importlib
import inspect
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simulator.curio.fil import ATTO_PER_FIL, ATTO_PER_NFIL

from ._market_only import DAY_S, WALLET, WEEK_EPOCH, WeekSetup

__all__ = ["AGENT_PATHS", "AgentPath", "NotAvailable", "availability", "run_agent_week"]


class NotAvailable(RuntimeError):
    """A path whose pieces are not there yet; the message says which."""


@dataclass(frozen=True, slots=True)
class AgentPath:
    """An agent path: its agent settings and what it runs on."""

    settings: dict[str, Any]
    llm: bool = False
    #: It reads the business (the market activities) and sets prices.
    market: bool = True
    needs: tuple[str, ...] = field(default=())


#: Demand mode as the demand day runs it (bench/demand_day/_day.py `PATHS`).
_DEMAND: dict[str, Any] = {
    "max_instances": 60,
    "max_fleet_dph": 60.0,
    "max_instance_dph": 3.0,
    "monitor_poll_seconds": 60,
    "heartbeat_seconds": 300,
    "target_mode": "demand",
    "min_target": 30.0,
    "max_target": 3000.0,
    "demand_headroom": 0.2,
    "demand_hysteresis": 0.15,
    "demand_lower_after_minutes": 30.0,
    "demand_lead_minutes": 30.0,
    "target_proofs_per_hour": 150.0,
}
#: The market mode on top (docs/OPERATIONS.md, "Selling proofs on the Snark
#: Market"); the challenges and dollars per FIL are the setup's.
_MARKET: dict[str, Any] = {
    "market_mode": "snark",
    "market_min_price_nfil": 2_000_000,
    "market_max_price_nfil": 10_000_000,
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
        importlib.import_module("testkit.agents")
    except ImportError as exc:
        # The message without the file's path (it names the module already).
        missing.append(f"the worker does not import ({str(exc).split(' (')[0]})")
    snark = importlib.import_module("simulator.snark_market")
    if not hasattr(snark, "FleetProver"):
        missing.append(
            "the Snark Market's node does not prove on the rented machines"
            " (no simulator.snark_market.FleetProver)"
        )
    if spec.market and not missing:
        agents = importlib.import_module("testkit.agents")
        if "market" not in inspect.signature(agents.running_worker).parameters:
            missing.append("the worker has no market activities (running_worker(market=...))")
    try:
        servers = importlib.import_module("testkit.servers")
        servers.faketime_library()
    except (ImportError, RuntimeError) as exc:
        missing.append(f"no frozen clock ({exc})")
    return "; ".join(missing) or None


async def run_agent_week(
    path: str,
    setup: WeekSetup,
    seed: int,
    *,
    start_price_nfil: int,
    step: int = 120,
) -> list[dict[str, Any]]:
    """The agent on `path` for `setup.days` days of the market; the days'
    figures as the fixed path reports them. `NotAvailable` when a piece is
    missing (`availability`)."""
    why = availability(path)
    if why is not None:
        raise NotAvailable(why)
    # Imported here: these import the worker (module doc).
    from activities.demand import DemandActivities
    from activities.demand_sources import CurioSource
    from activities.fleet import FleetActivities
    from bench.demand_day._lockstep import Lockstep
    from bench.market_day._drive import until_acted
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
    settings = dict(spec.settings)
    if spec.market:
        settings |= {"market_challenges": setup.challenges, "fil_usd": setup.fil_usd}
    prover = book_prover()
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
                snark_market=setup.market_config(0),
            ) as sim:
                market = sim.snark_market
                assert market is not None and sim.curio_url
                # The operator's part (the agent never sets the wallet).
                market.set_meta(True, WALLET, start_price_nfil * ATTO_PER_NFIL)
                clocks = Lockstep(env, sim, frozen=True)
                await clocks.start()
                async with VastClient(
                    sim.api_key, sim.url, timeout=5, backoff_base=0.01, pacing=NO_PACING
                ) as vast:
                    fleet = FleetActivities(vast, prover, store=store, clock=sim.market.now)
                    demand = DemandActivities(CurioSource(sim.curio_url, sim.curio_url))
                    extra: dict[str, Any] = {}
                    if spec.market:
                        extra["market"] = _market_activities(sim)
                    async with running_worker(
                        env.client,
                        store,
                        provider=None if spec.llm else AutopilotProvider(),
                        fleet=fleet,
                        demand=demand,
                        **extra,
                    ) as h:
                        handle = await h.start_agent(agent_id=f"market-week-{seed}", **settings)
                        clocks.watch(handle)
                        moved = await until_acted(env, sim, handle, 0, step, clocks.move)
                        before = _truth(sim, store, handle.id, fake, spec.llm)
                        for day in range(setup.days):
                            left = DAY_S - (moved if day == 0 else 0.0)
                            peak = over = 0
                            for _ in range(max(1, round(left / step))):
                                await clocks.advance(step, step)
                                acc = market.node_account()
                                if acc is not None:
                                    peak = max(peak, acc.used)
                                    over += acc.used > acc.slots
                            after = _truth(sim, store, handle.id, fake, spec.llm)
                            days.append(_day(day + 1, before, after, peak, over, setup.fil_usd))
                            before = after
        finally:
            await env.shutdown()
            store.dispose()
    return days


def _market_activities(sim: Any) -> Any:
    """The worker's market activities reading the simulator's Curio stand-in:
    the one place the harness builds them (expected: ``activities.market``
    ``MarketActivities.for_curio(rpc_origin, metrics_origin)``, as
    `CurioSource` takes the two origins)."""
    try:
        module = importlib.import_module("activities.market")
        build = module.MarketActivities.for_curio
    except (ImportError, AttributeError) as exc:
        raise NotAvailable(f"no market activities to build ({exc})") from None
    return build(sim.curio_url, sim.curio_url)


def _truth(sim: Any, store: Any, agent_id: str, fake: Any, llm: bool) -> dict[str, float]:
    """The running totals a day's figures are the differences of."""
    from bench.market_day.day import llm_totals

    acc = sim.snark_market.node_account()
    charges = sim.market.charges()
    bandwidth = sum(float(r.get("bandwidth_usd", 0.0)) for r in charges["instances"])
    return {
        "paid_proofs": acc.paid_proofs,
        "earned_atto": acc.cumulative_atto,
        "challenges_done": acc.challenges_done,
        "penalties": acc.penalties,
        "slots": acc.slots,
        "usd": float(charges["total_usd"]),
        "transfer_usd": bandwidth,
        "llm_usd": float(llm_totals(store, agent_id, fake)["usd"]) if llm else 0.0,
        "at": time.monotonic(),
    }


def _day(
    day: int, before: dict[str, float], after: dict[str, float], peak: int, over: int, fil: float
) -> dict[str, Any]:
    delta = {k: after[k] - before[k] for k in after}
    revenue_fil = delta["earned_atto"] / ATTO_PER_FIL
    transfer = delta["transfer_usd"]
    rental = delta["usd"] - transfer
    cost = rental + transfer + delta["llm_usd"]
    paid = int(delta["paid_proofs"])
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
        "slots": int(after["slots"]),
        "peak_slots_used": peak,
        "over_slots": over,
        "wall_s": round(delta["at"], 1),
    }
