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
over the allowed offers and our own machines at each target change.

    .venv/bin/python bench/market_day.py [--hours 24] [--paths autopilot,llm]
        [--faults realistic|harsh|both] [--seed 5]

Prints a table per path and writes bench/results/market_day-<time>.json.
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

import _common  # puts the repository root on sys.path (for tests.fakes)
from _market_day_report import causes_line, day_report, seeds_summary
from _market_day_truth import (
    CONFIG,
    Day,
    destroyed_as,
    failed,
    mark_creates,
    observe,
    run_counts,
    target_at,
)
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from activities.fleet_results import offer_row
from fleet_agent.fleet.guardrails import offer_refusal
from fleet_agent.fleet.offer_query import allowed_gpu_names, offer_filters
from fleet_agent.fleet.oracle import Item, cheapest_cover, planning_unit
from fleet_agent.fleet.spare import cheapest_spared_cover
from fleet_agent.llm.autopilot import AutopilotProvider
from fleet_agent.models import AgentConfig
from fleet_agent.prover import ProverSpec
from fleet_agent.sim.fate import MEAN_RATE_JITTER
from fleet_agent.sim.server import SimServer
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from tests.fakes import FakeAnthropic
from tests.fakes.autopilot_llm import autopilot_reply
from tests.helpers import running_worker
from tests.servers import start_time_skipping_env
from workflows import FleetAgentWorkflow

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


async def _oracle(
    vast: VastClient, prover: ProverSpec, config: AgentConfig, state: dict[str, Any]
) -> dict[str, Any]:
    """The cheapest fleet meeting the target: allowed offers plus our machines.
    Also the cheapest that keeps what the fleet has (`no_rebuild_dph`): all
    our machines plus the cheapest offers for the rest after an increase, the
    cheapest subset of ours after a decrease. The gap between the two is what
    only a rebuild could take (docs/DECISIONS.md, "Load time").

    Our machines count at what they really prove (the simulator's truth);
    an offer, whose truth is drawn only when it is rented, at what it is
    expected to prove: the capacity model's estimate times the simulator's
    mean rate jitter (`MEAN_RATE_JITTER`, 0.985). Planned on the bare
    estimates (`oracle_on_estimates_dph`, the yardstick before 2026-12-01),
    the oracle's fleet falls short of the target in truth by 1.5 % on
    average, and favours offers over our own machines by as much."""
    names = allowed_gpu_names(config.allowed_gpus, await vast.gpu_names())
    found = await vast.search_offers_paged(
        offer_filters(config, prover, names),
        page_size=500,
        max_pages=6,
        allocated_storage=prover.disk_gb,
    )
    allowed = [o for o in found.offers if offer_refusal(o, config, prover) is None]
    estimated = [
        Item(key=o.id, cost=o.dph_total, rate=offer_row(o)["est_proofs_per_hour"]) for o in allowed
    ]
    items = [Item(key=i.key, cost=i.cost, rate=i.rate * MEAN_RATE_JITTER) for i in estimated]
    ours = [
        Item(
            key=-int(r["id"]), cost=float(r["dph_total"]), rate=float(r["expected_proofs_per_hour"])
        )
        for r in state["instances"]
        if r.get("cur_state") != "unloaded" and not failed(r)
    ]
    target = config.target_proofs_per_hour
    cover = cheapest_cover(items + ours, target, planning_unit(target))
    on_estimates = cheapest_cover(estimated + ours, target, planning_unit(target))
    own = sum(i.rate for i in ours)
    if own >= target:
        kept = cheapest_cover(ours, target, planning_unit(target)).cost
    else:
        rest = target - own
        kept = sum(i.cost for i in ours) + cheapest_cover(items, rest, planning_unit(rest)).cost
    # With the spare on, the cheapest fleet that holds the same kind of level.
    spared = cheapest_spared_cover(items + ours, target) if config.spare_one_machine else None
    return {
        "target": config.target_proofs_per_hour,
        "oracle_dph": round(cover.cost, 4),
        "oracle_on_estimates_dph": round(on_estimates.cost, 4),
        "no_rebuild_dph": round(kept, 4),
        "spared_dph": round(spared.cost, 4) if spared is not None and spared.met else None,
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
) -> dict[str, Any]:
    prover = ProverSpec() if min_inet_down is None else ProverSpec(min_inet_down_mbps=min_inet_down)
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
                sim.market.set_faults(None, **FAULT_LEVELS[faults])
                async with VastClient(
                    sim.api_key, sim.url, timeout=5, backoff_base=0.01, pacing=NO_PACING
                ) as vast:
                    fleet = FleetActivities(vast, prover, store=store, clock=sim.market.now)
                    provider = AutopilotProvider() if path == "autopilot" else None
                    async with running_worker(
                        env.client, store, provider=provider, fleet=fleet
                    ) as h:
                        agent_id = await _drive(day, env, h, sim, vast, prover, hours, step, spare)
                    destroyed_as(day, store, agent_id)
                    mark_creates(day, store, agent_id)
                    runs = run_counts(store, agent_id)
                    counters = sim.market.state()["counters"]
        finally:
            await env.shutdown()
            store.dispose()
            if keep_store is not None:
                _keep(Path(tmp) / "fleet.db", keep_store / f"{path}-{faults}-s{seed}.db")
    report = day_report(path, day, counters, hours, time.monotonic() - started, spare=spare)
    return {"faults": faults, "spare_one_machine": spare, **report, **runs}


def _keep(db: Path, to: Path) -> None:
    """Keep a day's store (runs, tool calls, snapshots) to read a moment of the day after."""
    to.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(db, to)


async def _drive(
    day: Day,
    env: WorkflowEnvironment,
    h: Any,
    sim: SimServer,
    vast: VastClient,
    prover: ProverSpec,
    hours: float,
    step: int,
    spare: bool,
) -> str:
    target = target_at(0)
    settings = {**CONFIG, "spare_one_machine": spare}
    handle = await h.start_agent(target_proofs_per_hour=target, **settings)
    t0 = sim.market.now()
    config = AgentConfig(target_proofs_per_hour=target, **settings)
    for i in range(int(hours * 3600 // step)):
        hour = i * step / 3600
        wanted = target_at(hour)
        if wanted != target:
            target = wanted
            config = config.model_copy(update={"target_proofs_per_hour": target})
            oracle = await _oracle(vast, prover, config, sim.market.state())
            day.oracle.append({"hour": hour, **oracle})
            await handle.execute_update(
                FleetAgentWorkflow.update_config, {"target_proofs_per_hour": target}
            )
        elif i == 0:
            oracle = await _oracle(vast, prover, config, sim.market.state())
            day.oracle.append({"hour": 0.0, **oracle})
        # Market time and workflow time move together, a step at a time.
        sim.market.advance(step)
        await env.sleep(step)
        state = sim.market.state()
        now = sim.market.now() - t0
        observe(day, state, now)
        day.samples.append((now, target, float(state["proofs_per_hour"]), state["spend_per_hour"]))
    return str(handle.id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
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
                )
            },
        )
        print(f"  minutes out of band after hour 1: {causes_line([result])}")
        for p in result["periods"]:
            print(
                f"  from hour {p['hour']:>4.1f}: target {p['target']:.0f}, fleet "
                f"${p['fleet_dph']}/h, oracle ${p['oracle_dph']}/h, ratio {p['ratio']} "
                f"(on bare estimates ${p['oracle_on_estimates_dph']}/h, "
                f"{p['ratio_on_estimates']}); "
                f"keeping the fleet ${p['no_rebuild_dph']}/h, ratio {p['ratio_no_rebuild']}; "
                f"spared oracle ${p['spared_dph']}/h, ratio {p['ratio_spared']}"
            )
    if len(seeds) > 1:
        seeds_summary(results)
    out = _common.write_json("market_day", {"runs": results}, args.json_out)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
