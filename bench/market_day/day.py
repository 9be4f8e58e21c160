"""Market day: 24 simulated hours of the fleet on the realistic market.

The simulator (10,000 offers, the "realistic" faults plus machine deaths and
prover faults often enough to matter) runs on its own clock, moved in steps
together with the time-skipping Temporal test server, so a day takes minutes.
A real worker runs the agent, its monitor (which reads every machine's prover
status over HTTP) and the fleet tools with the real vast.ai client. The
target changes during the day. Every step samples the simulator's truth:
proofs being finished now, $/h being billed, and each machine's prover.

Two paths decide: the offline autopilot, and the LLM path (the real anthropic
client against the fake Messages API, answering with the autopilot's
decisions). The yardstick is the exact cheapest fleet (fleet_agent/fleet/oracle.py)
over the allowed offers and our own machines, taken before the agent first
acts and at each target change (the agent is let act on a start or change
before the market's clock moves on), and every 30 minutes through a period
for its market mean (ratio_market_mean).

    .venv/bin/python -m bench.market_day.day [--hours 24] [--paths autopilot,llm]
        [--faults realistic|harsh|both] [--seed 5]

Prints a table per path and writes bench/results/market_day-<time>.json.
MARKET_DAY_TARGETS="0:500,1.5:800,3:300,4:500" (with --hours 5) runs the
day's changes in five hours instead (bench/market_day/_truth.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from activities.fleet import FleetActivities
from bench import _common
from bench.market_day._demand import demand_report, parse_shares
from bench.market_day._drive import drive
from bench.market_day._failures import failures_line
from bench.market_day._increases import increases_line
from bench.market_day._report import causes_line, day_report, seeds_summary
from bench.market_day._truth import (
    Day,
    destroyed_as,
    mark_creates,
    run_counts,
)
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.llm.model_table import EFFORTS
from fleet_agent.loop.pace import hour_spend
from fleet_agent.models import SpendMark
from fleet_agent.store import RunRecord, Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator.server import SimServer
from testkit.agents import running_worker
from testkit.fakes import FakeAnthropic
from testkit.fakes.autopilot_llm import autopilot_reply
from testkit.servers import start_time_skipping_env
from testkit.sim_helpers import SIM_RAM_GIB

#: Fault levels on top of the simulator's "realistic" scenario (its own rates:
#: 3 % of boots fail and 3 % hang, machines die at 0.3 %/h, provers fail at
#: 0.6 %/h, docs/SIMULATOR.md). "harsh" makes machines die and provers fail
#: about five times as often, to stress replacement.
FAULT_LEVELS: dict[str, dict[str, Any]] = {
    "realistic": {},
    "harsh": {
        "death_rate_per_hour": 0.02,
        "cuda_error_rate_per_hour": 0.01,
        "prover_stuck_rate_per_hour": 0.01,
    },
}


async def run_path(
    path: str,
    faults: str,
    hours: float,
    seed: int,
    step: int,
    min_inet_down: float | None = None,
    spare: bool = True,
    keep_store: Path | None = None,
    effort: str | None = None,
    shares: tuple[tuple[float, float], ...] = ((0.0, 1.0),),
    blips_per_hour: float = 0.0,
) -> dict[str, Any]:
    # The simulator's provers listen on loopback.
    prover = ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB)
    if min_inet_down is not None:
        prover = ProverSpec(
            mode="curio_on_host",
            allow_loopback=True,
            min_host_ram_gib=SIM_RAM_GIB,
            min_inet_down_mbps=min_inet_down,
        )
    day = Day()
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(dir=os.environ.get("MARKET_DAY_TMP")) as tmp,
        FakeAnthropic() as fake,
    ):
        fake.set_responder(autopilot_reply)
        if path == "llm":
            os.environ.update(fake.env())
        else:
            os.environ.pop("ANTHROPIC_API_KEY", None)
        store = Store(f"sqlite:///{Path(tmp) / 'fleet.db'}")
        store.create_all()
        env = await start_time_skipping_env()
        try:
            with SimServer(seed=seed, speed=0, scenario="realistic", rate_limits=False) as sim:
                sim.market.set_faults(
                    None, **FAULT_LEVELS[faults], offline_blip_rate_per_hour=blips_per_hour
                )
                async with VastClient(
                    sim.api_key, sim.url, timeout=5, backoff_base=0.01, pacing=NO_PACING
                ) as vast:
                    fleet = FleetActivities(vast, prover, store=store, clock=sim.market.now)
                    provider = AutopilotProvider() if path == "autopilot" else None
                    async with running_worker(
                        env.client, store, provider=provider, fleet=fleet
                    ) as h:
                        agent_id = await drive(
                            day, env, h, sim, vast, prover, hours, step, spare, effort, shares
                        )
                    destroyed_as(day, store, agent_id)
                    mark_creates(day, store, agent_id)
                    runs = run_counts(store, agent_id)
                    runs["llm"] = llm_totals(store, agent_id, fake)
                    spend = sum(dph for *_, dph in day.samples) * day.step() / 3600
                    counters = sim.market.state()["counters"]
                    runs["demand"] = demand_report(day, store, agent_id, shares, spend, counters)
        finally:
            await env.shutdown()
            store.dispose()
            if keep_store is not None:
                _keep(Path(tmp) / "fleet.db", keep_store / f"{path}-{faults}-s{seed}.db")
    report = day_report(path, day, counters, hours, time.monotonic() - started, spare=spare)
    return {"faults": faults, "spare_one_machine": spare, **report, **runs}


def llm_totals(store: Store, agent_id: str, fake: FakeAnthropic) -> dict[str, Any]:
    """What the day's LLM rounds cost (the store's run records, priced as the
    run log prices them) and how they ended: refused requests (the fake's
    400s and others) and stop reasons other than a finished turn."""
    totals = store.run_costs.llm_totals(agent_id)
    stops: dict[str, int] = {}
    runs = store.run_reads.list_runs(agent_id, limit=100_000)
    for run in runs:
        for stop in run.stop_reasons:
            stops[stop] = stops.get(stop, 0) + 1
    refused = [r for r in fake.requests if r.usage is None]
    # The costliest hour, as the agent's max_llm_usd_per_hour counts it: the
    # runs that ended in any hour (each run's latest attempt).
    latest: dict[int, RunRecord] = {}
    for run in runs:  # newest attempt first
        latest.setdefault(run.run, run)
    marks = sorted(
        (SpendMark(at=r.ended_at, usd=r.cost_usd) for r in latest.values() if r.ended_at),
        key=lambda m: m.at,
    )
    busiest = max((hour_spend(marks[: i + 1], m.at) for i, m in enumerate(marks)), default=0.0)
    return {
        "runs": totals.runs,
        "usd": totals.cost_usd,
        "usd_per_run": totals.cost_usd / max(totals.runs, 1),
        "most_usd_in_an_hour": round(busiest, 4),
        "output_tokens": totals.usage.output_tokens,
        "thinking_tokens": totals.usage.thinking_tokens,
        "requests": len(fake.requests),
        "requests_refused": len(refused),
        "stop_reasons": dict(sorted(stops.items())),
    }


def _keep(db: Path, to: Path) -> None:
    """Keep a day's store (runs, tool calls, snapshots) to read a moment of the day after."""
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(db, to)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--paths", default="autopilot,llm")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--seeds",
        default=None,
        help="several market seeds, e.g. 2,3,5 (instead of --seed), summed up at the end",
    )
    parser.add_argument("--faults", default="realistic", help="realistic, harsh, or both")
    parser.add_argument("--step", type=int, default=120, help="seconds per step")
    parser.add_argument(
        "--min-inet-down",
        type=float,
        default=None,
        help="the prover's min_inet_down_mbps (default: ProverSpec's)",
    )
    parser.add_argument(
        "--spare",
        choices=("on", "off"),
        default="on",
        help="the agent's spare_one_machine (default: on, as AgentConfig's)",
    )
    parser.add_argument(
        "--effort",
        choices=EFFORTS,
        default=None,
        help="the agent's llm_effort on the LLM path (default: AgentConfig's)",
    )
    parser.add_argument(
        "--work-share",
        default=None,
        help='the work source by hour, e.g. "0:1,6:0.3,12:0,15:1" (default: always 1)',
    )
    parser.add_argument(
        "--blips-per-hour",
        type=float,
        default=0.0,
        help="hazard per machine-hour of a host offline for a minute",
    )
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument(
        "--keep-store",
        type=Path,
        default=None,
        help="a directory to keep each day's store in (PATH-FAULTS-sSEED.db), to read runs after",
    )
    args = parser.parse_args(argv)
    results = []
    levels = list(FAULT_LEVELS) if args.faults == "both" else [args.faults]
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed]
    runs = [(p.strip(), f, s) for s in seeds for f in levels for p in args.paths.split(",")]
    for path, faults, seed in runs:
        result = asyncio.run(
            run_path(
                path,
                faults,
                args.hours,
                seed,
                args.step,
                args.min_inet_down,
                args.spare == "on",
                args.keep_store,
                args.effort,
                parse_shares(args.work_share),
                args.blips_per_hour,
            )
        )
        result["seed"] = seed
        results.append(result)
        _common.print_table(
            f"market day — {result['path']}, {faults} faults, seed {seed}, spare {args.spare}",
            {
                k: v
                for k, v in result.items()
                if k
                not in (
                    "path",
                    "faults",
                    "seed",
                    "spare_one_machine",
                    "periods",
                    "thrashed",
                    "samples",
                    "replacements",
                    "lives",
                    "runs_by_trigger",
                    "minutes_out_of_band",
                    "after_increases",
                    "after_failures",
                    "demand",
                )
            },
        )
        print(f"  with less work than capacity: {result['demand']}")
        print(f"  minutes out of band after hour 1: {causes_line([result])}")
        print(f"  after the increases: {increases_line([result])}")
        print(f"  failures: {failures_line([result])}")
        for p in result["periods"]:
            print(
                f"  from hour {p['hour']:>4.1f}: target {p['target']:.0f}, fleet "
                f"${p['fleet_dph']}/h, oracle ${p['oracle_dph']}/h, ratio {p['ratio']} "
                f"(on bare estimates ${p['oracle_on_estimates_dph']}/h, "
                f"{p['ratio_on_estimates']}); "
                f"keeping the fleet ${p['no_rebuild_dph']}/h, ratio {p['ratio_no_rebuild']}; "
                f"spared oracle ${p['spared_dph']}/h, ratio {p['ratio_spared']}; "
                f"the oracle through the period ${p['market_mean_dph']}/h on the mean "
                f"(${p['market_low_dph']}-{p['market_high_dph']}), ratio {p['ratio_market_mean']}"
            )
    if len(seeds) > 1:
        seeds_summary(results)
    out = _common.write_json("market_day", {"runs": results}, args.json_out)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
