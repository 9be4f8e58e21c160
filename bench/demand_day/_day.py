"""One demand day: the simulator with a seeded work source whose items have
deadlines, the autopilot agent on it, and the day's figures from the
simulator's truth; beside it the foresight oracle (bench/demand_day/_oracle.py)
on the same arrivals and the book listed when the demand starts.

The agent first gets `warmup_h` hours with no demand to build its fleet (its
first machines take 10-60 minutes to prove; with the demand from the first
minute, no fleet could meet the first half hour's deadlines). Then the demand
runs for `hours`, and stops; the day runs on for the deadline and two minutes
more, so every item's deadline has passed and been counted. The spend is the
simulator's billing (GET /_sim/charges) over that span; the oracle may start
it with machines of the book already proving, as the agent does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import tempfile
import time
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from activities.demand import DemandActivities
from activities.demand_sources import HttpJsonSource
from activities.fleet import FleetActivities
from bench.demand_day._lockstep import DAY_EPOCH, Lockstep, monitor_instants
from bench.demand_day._oracle import arrivals_per_slot, offer_types, solve
from bench.market_day._drive import allowed_rows, until_acted
from bench.market_day._truth import CONFIG
from bench.market_day.day import _keep, llm_totals
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.loop.pace import in_window
from fleet_agent.models import AgentConfig, TriggerKind
from fleet_agent.store import DemandHistory, Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator.demand import DemandConfig, parse_curve
from simulator.server import SimServer
from testkit.agents import running_worker
from testkit.fakes import FakeAnthropic
from testkit.fakes.autopilot_llm import autopilot_reply
from testkit.servers import start_time_skipping_env
from testkit.sim_helpers import SIM_RAM_GIB

__all__ = ["DEFAULT_CURVE", "ON_TIME_GOAL", "PATHS", "default_demand", "on_the_day", "run_day"]

#: Proofs/h by UTC hour of the sim clock: a quiet night, a working-day rise,
#: an afternoon peak (the market day's targets span 300-800 proofs/h).
DEFAULT_CURVE = "0:250,5:200,9:450,13:700,17:600,21:350"
#: The on-time share demand mode is held to (issue 45), %.
ON_TIME_GOAL = 99.5
#: How the agent's target is set, by path: `fixed` holds `--target`;
#: `demand` (target_mode demand) starts at `--target` and follows the
#: simulator's GET /demand from there, within [min_target, max_target].
PATHS: dict[str, dict[str, Any]] = {
    "fixed": {},
    "demand": {
        "target_mode": "demand",
        "min_target": 150.0,
        "max_target": 3000.0,
        "demand_headroom": 0.2,
        "demand_hysteresis": 0.15,
        "demand_lower_after_minutes": 30.0,
        # The market's machines take 10-60 minutes from rental to first proof.
        "demand_lead_minutes": 30.0,
    },
}
#: The LLM path beside the autopilot: the real anthropic client against the
#: fake Messages API (thinking blocks, signatures), which answers with the
#: autopilot's decisions read from the prompt (testkit/fakes/autopilot_llm.py).
PATHS["demand-llm"] = PATHS["demand"]
#: Paths on the LLM (the others run the autopilot provider).
LLM_PATHS = frozenset({"demand-llm"})
#: The oracle's time grid, seconds.
SLOT_S = 600.0


def default_demand(curve: str = DEFAULT_CURVE) -> DemandConfig:
    """The day's demand: `curve`, three bursts a day of about 45 minutes at
    up to twice the curve, a 30-minute deadline."""
    return DemandConfig(
        curve=parse_curve(curve),
        burst_rate_per_day=3.0,
        burst_minutes=45.0,
        burst_multiplier=2.0,
        deadline_minutes=30.0,
    )


def on_the_day(demand: DemandConfig, start_s: float, start_hour: float) -> DemandConfig:
    """`demand` with its curve moved so that its `start_hour` falls at sim
    time `start_s`: the simulator's clock starts at the wall clock's time,
    and the curve is by UTC hour of it (bursts stay where the seed puts them)."""
    shift = (start_s % 86_400) / 3600 - start_hour
    curve = sorted(((h + shift) % 24, r) for h, r in demand.curve)
    return dataclasses.replace(demand, curve=tuple(curve))


async def run_day(
    path: str,
    seed: int,
    hours: float,
    target: float,
    demand: DemandConfig,
    *,
    step: int = 120,
    warmup_h: float = 1.0,
    start_hour: float = 0.0,
    oracle_limit_s: float = 60.0,
    overrides: dict[str, Any] | None = None,
    frozen: bool = True,
    keep_store: Path | None = None,
) -> dict[str, Any]:
    """The day on `path` at `target` proofs/h, its demand from the curve's
    `start_hour` on, and its oracle; `overrides`: config keys over the
    path's (`--set`). `frozen`: on the frozen-clock server, where one seed
    gives one day (bench/demand_day/_lockstep.py); else on the wall clock's.
    `keep_store`: a file to copy the day's store to (its runs' messages,
    tool calls and snapshots), to see where two days parted."""
    prover = ProverSpec(
        mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB
    )  # the simulator's provers listen on loopback
    settings = {**CONFIG, **PATHS[path], **(overrides or {}), "target_proofs_per_hour": target}
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(dir=os.environ.get("MARKET_DAY_TMP")) as tmp,
        FakeAnthropic() as fake,
    ):
        fake.set_responder(autopilot_reply)
        if path in LLM_PATHS:
            os.environ.update(fake.env())
        else:
            os.environ.pop("ANTHROPIC_API_KEY", None)
        store = Store(f"sqlite:///{Path(tmp) / 'fleet.db'}")
        store.create_all()
        env = await start_time_skipping_env(frozen=frozen)
        try:
            with SimServer(
                seed=seed,
                speed=0,
                scenario="realistic",
                rate_limits=False,
                start_epoch=DAY_EPOCH,
            ) as sim:
                clocks = Lockstep(env, sim, frozen=frozen)
                await clocks.start()
                async with VastClient(
                    sim.api_key, sim.url, timeout=5, backoff_base=0.01, pacing=NO_PACING
                ) as vast:
                    fleet = FleetActivities(vast, prover, store=store, clock=sim.market.now)
                    demand_source = DemandActivities(HttpJsonSource(f"{sim.url}/demand"))
                    async with running_worker(
                        env.client,
                        store,
                        provider=None if path in LLM_PATHS else AutopilotProvider(),
                        fleet=fleet,
                        demand=demand_source if PATHS[path].get("target_mode") else None,
                    ) as h:
                        # Its ID is in every label it rents under: the same each run.
                        handle = await h.start_agent(agent_id=f"demand-day-{seed}", **settings)
                        clocks.watch(handle)
                        moved = await until_acted(env, sim, handle, 0, step, clocks.move)
                        await clocks.advance(warmup_h * 3600 - moved, step)
                        rows = await allowed_rows(vast, prover, AgentConfig(**settings))
                        before = _account(sim)
                        start_minute = math.ceil(sim.market.now() / 60.0)
                        demand = on_the_day(demand, start_minute * 60.0, start_hour)
                        sim.market.set_demand(demand)
                        await clocks.advance(hours * 3600, step)
                        # No more arrivals: every deadline passes, then is counted.
                        switched = sim.market.set_demand(
                            dataclasses.replace(
                                demand, curve=((0.0, 0.0),), burst_rate_per_day=0.0, events=()
                            )
                        )
                        # The minutes drawn on the day's curve (the queue
                        # runs a minute behind the clock): the oracle's too.
                        assert switched is not None
                        minutes = round(switched["processed_until"] / 60) - start_minute
                        await clocks.advance(demand.deadline_minutes * 60 + 120, step)
                        after = _account(sim)
                        path_rows = rentals_path(sim.market.charges(), start_minute * 60.0)
                        work = sim.market.state()["demand"]
                        llm = llm_totals(store, handle.id, fake) if path in LLM_PATHS else None
                        targets = _targets(store, handle.id)
                        runs_log = _runs_log(store, handle.id, start_minute * 60.0)
                        ties = _ties(
                            store, handle.id, await monitor_instants(env.client, handle.id)
                        )
        finally:
            await env.shutdown()
            store.dispose()
            if keep_store is not None:
                _keep(Path(tmp) / "fleet.db", keep_store)
    day = _figures(work, before, after)
    day["start_hour"] = start_hour
    day["curve_on_the_sim_clock"] = [list(p) for p in demand.curve]
    day["wall_s"] = round(time.monotonic() - started, 1)
    day["clock"] = "frozen" if frozen else "wall"
    day["sleep_timeouts"] = clocks.sleep_timeouts
    day["steps_not_quiet"] = clocks.not_quiet
    day["llm"] = llm
    day["targets"] = targets
    day["rentals_path"] = path_rows
    day["rentals_digest"] = path_digest(path_rows)
    day["runs_log"] = runs_log
    day["runs_at_a_monitor_instant"] = ties
    types = offer_types(rows)
    arrivals = arrivals_per_slot(demand, seed, start_minute, minutes, SLOT_S)
    oracle = solve(
        arrivals,
        types,
        slot_s=SLOT_S,
        deadline_s=demand.deadline_minutes * 60,
        warm={t.name: t.available for t in types},
        time_limit_s=oracle_limit_s,
    )
    day["oracle"] = {
        "feasible": oracle.feasible,
        "message": oracle.message,
        "usd": _r(oracle.usd),
        "usd_per_proof": _r(oracle.usd_per_proof),
        "arrivals": oracle.proofs,
        "offer_types": len(types),
        "rentals": oracle.rentals,
        "solve_s": oracle.solve_s,
    }
    per = day["usd_per_proof_on_time"]
    day["vs_oracle"] = _r(per / oracle.usd_per_proof) if per and oracle.usd_per_proof else None
    return {"path": path, "seed": seed, "target": target, "overrides": overrides or {}, **day}


def _targets(store: Store, agent_id: str) -> dict[str, Any]:
    """How the target moved (demand mode's points, the monitor's decisions):
    its changes, the most in any hour, range and time-weighted mean; and the
    changes the agent held past max_demand_changes_per_hour (its runs were
    told of them with "[held from"). Empty on a fixed path."""
    points = DemandHistory(store).series(agent_id, datetime(2000, 1, 1, tzinfo=UTC), 100_000)
    if not points:
        return {}
    moves = [b.at for a, b in pairwise(points) if a.target_per_h != b.target_per_h]
    changes = len(moves)
    busiest = max((len(in_window(moves[: i + 1], at)) for i, at in enumerate(moves)), default=0)
    runs = store.run_reads.list_runs(agent_id, limit=100_000)
    told = [
        t.reason
        for r in runs
        for t in r.triggers
        if t.kind == TriggerKind.CONFIG_CHANGED and "(demand:" in t.reason
    ]
    span = (points[-1].at - points[0].at).total_seconds() or 1.0
    weighted = sum(a.target_per_h * (b.at - a.at).total_seconds() for a, b in pairwise(points))
    return {
        "points": len(points),
        "changes": changes,
        "min": min(p.target_per_h for p in points),
        "max": max(p.target_per_h for p in points),
        "mean": round(weighted / span, 1),
        "raises": sum(1 for p in points if p.action == "raise"),
        "lowers": sum(1 for p in points if p.action == "lower"),
        "most_changes_in_an_hour": busiest,
        "runs": len(runs),
        "runs_told_of_demand": len(told),
        "held_then_applied": sum(r.count("[held from") for r in told),
    }


def _ties(store: Store, agent_id: str, instants: set[int]) -> int:
    """Runs that started at an instant the monitor acted at too: their tool
    calls and its reads met in an order the worker chose (none on a day
    that reproduces by construction)."""
    runs = store.run_reads.list_runs(agent_id, limit=100_000)
    return sum(1 for r in runs if round(r.started_at.timestamp() * 1000) in instants)


def _runs_log(store: Store, agent_id: str, origin: float) -> list[list[Any]]:
    """The agent's runs, in order: when each started (workflow time, seconds
    from `origin`), its number, its triggers' kinds and what it did (its
    actions digest): where two runs of one seed parted, if they did."""
    runs = sorted(store.run_reads.list_runs(agent_id, limit=100_000), key=lambda r: r.run)
    return [
        [
            round(r.started_at.timestamp() - origin, 3),
            r.run,
            sorted({t.kind.value for t in r.triggers}),
            r.actions_digest,
        ]
        for r in runs
    ]


def rentals_path(charges: dict[str, Any], origin: float) -> list[list[Any]]:
    """Every machine the account rented, in the order rented: its start and
    end (None: still rented) in sim seconds from `origin` (the demand's
    start), its id and $/h; two runs of one seed took the same path when
    these are equal (GET /_sim/charges, simulator/billing.py)."""

    def rel(t: float | None) -> float | None:
        return None if t is None else round(t - origin, 3)

    rows = sorted(charges["instances"], key=lambda r: (r["started_at"], r["id"]))
    return [[rel(r["started_at"]), rel(r["ended_at"]), r["id"], r["dph_total"]] for r in rows]


def path_digest(rows: list[list[Any]]) -> str:
    """A short digest of `rentals_path`: equal digests, equal paths."""
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:12]


def _account(sim: SimServer) -> dict[str, float]:
    counters = sim.market.state()["counters"]
    return {
        "usd": float(sim.market.charges()["total_usd"]),
        "creates": counters["creates"],
        "destroys": counters["destroys"],
    }


def _figures(
    work: dict[str, Any], before: dict[str, float], after: dict[str, float]
) -> dict[str, Any]:
    """The day's figures from the demand's counters and the account's billing."""
    arrived, on_time = int(work["arrived"]), int(work["done_on_time"])
    usd = after["usd"] - before["usd"]
    return {
        "on_time_pct": round(100 * on_time / arrived, 3) if arrived else None,
        "usd": round(usd, 4),
        "usd_per_proof_on_time": _r(usd / on_time if on_time else None),
        "idle_machine_hours": round(float(work["idle_machine_seconds"]) / 3600, 3),
        "rentals": int(after["creates"] - before["creates"]),
        "releases": int(after["destroys"] - before["destroys"]),
        "arrived": arrived,
        "done_on_time": on_time,
        "late": int(work["late"]),
        "expired": int(work["expired"]),
        "left_over": int(work["queued"]) + int(work["in_flight"]),
    }


def _r(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None
