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
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _common  # puts the repository root on sys.path (for tests.fakes)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from activities.fleet_results import offer_row
from fleet_agent.fleet.guardrails import offer_refusal
from fleet_agent.fleet.offer_query import allowed_gpu_names, offer_filters
from fleet_agent.fleet.oracle import Item, cheapest_cover, planning_unit
from fleet_agent.fleet.provers import MIN_STALL_S, STALL_INTERVALS
from fleet_agent.fleet.spare import cheapest_spared_cover
from fleet_agent.llm.autopilot import AutopilotProvider
from fleet_agent.models import AgentConfig
from fleet_agent.prover import ProverSpec
from fleet_agent.sim.server import SimServer
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from starter.devserver import find_test_server
from tests.fakes import FakeAnthropic
from tests.fakes.autopilot_llm import autopilot_reply
from tests.helpers import running_worker
from workflows import FleetAgentWorkflow

#: (hour, target proofs/h): the operator's changes during the day.
TARGETS = ((0, 500.0), (6, 800.0), (12, 300.0), (18, 500.0))
CONFIG = {
    "max_instances": 60,
    "max_fleet_dph": 60.0,
    "max_instance_dph": 3.0,
    "monitor_poll_seconds": 60,
    "heartbeat_seconds": 300,
}
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
BAND = 0.05  # ±5 % of target
SETTLE_S = 3600.0  # after a start or a target change
THRASH_MINUTES = 20.0


@dataclass
class Life:
    """One machine as the simulator saw it."""

    created: float
    failed_at: float | None = None  # prover error/stuck or dead status first seen
    failure: str = ""  # what failed: the status, "prover error" or "prover stuck"
    proving_at: float | None = None  # its prover first seen proving
    why: str = ""  # the reason the destroy gave
    boot: str = "run"  # the simulator's draw: run, stuck (hangs loading) or boot_fail
    destroyed_at: float | None = None
    healthy_at_destroy: bool = True
    last: str = ""  # the last state seen before it went
    rate: float = 0.0  # the last proofs/h the simulator gave it while it proved
    dph: float = 0.0  # its price, $/h (dph_total)
    true_rate: float = 0.0  # what it proves while healthy (the simulator's truth)


@dataclass
class Day:
    samples: list[tuple[float, float, float, float]] = field(default_factory=list)
    lives: dict[int, Life] = field(default_factory=dict)
    oracle: list[dict[str, Any]] = field(default_factory=list)


def _target_at(hour: float) -> float:
    return [t for h, t in TARGETS if h <= hour][-1]


def _failed(row: dict[str, Any]) -> bool:
    return bool(_failure(row))


def _failure(row: dict[str, Any]) -> str:
    """What the simulator's truth says failed on this machine, or ""."""
    status = row.get("actual_status")
    if status in ("exited", "offline", "unknown"):
        return str(status)
    if row.get("prover_error"):
        return "prover error"
    if row.get("prover_stuck"):
        return "prover stuck"
    return ""


def _observe(day: Day, state: dict[str, Any], t: float) -> None:
    seen = set()
    for row in state["instances"]:
        iid = int(row["id"])
        seen.add(iid)
        life = day.lives.setdefault(iid, Life(created=t))
        if row.get("destroyed_at") is not None or row.get("cur_state") == "unloaded":
            if life.destroyed_at is None:
                life.destroyed_at = t
                life.healthy_at_destroy = life.failed_at is None
        else:
            life.last = (
                f"{row.get('actual_status')}/{row.get('prover_phase')} "
                f"start_date={row.get('start_date')} {str(row.get('status_msg') or '')[:60]}"
            )
            life.boot = str(row.get("boot_outcome") or "run")
            life.dph = float(row.get("dph_total") or 0.0)
            life.true_rate = float(row.get("expected_proofs_per_hour") or 0.0)
            if float(row.get("proofs_per_hour") or 0.0) > 0:
                life.rate = float(row["proofs_per_hour"])
            if life.proving_at is None and row.get("prover_phase") == "proving":
                life.proving_at = t
            if life.failed_at is None and _failed(row):
                life.failed_at = t
                life.failure = _failure(row)
    for iid, life in day.lives.items():
        if iid not in seen and life.destroyed_at is None:
            life.destroyed_at = t
            life.healthy_at_destroy = life.failed_at is None


async def _oracle(
    vast: VastClient, prover: ProverSpec, config: AgentConfig, state: dict[str, Any]
) -> dict[str, Any]:
    """The cheapest fleet meeting the target: allowed offers plus our machines.
    Also the cheapest that keeps what the fleet has (`no_rebuild_dph`): all
    our machines plus the cheapest offers for the rest after an increase, the
    cheapest subset of ours after a decrease. The gap between the two is what
    only a rebuild could take (docs/DECISIONS.md, "Load time")."""
    names = allowed_gpu_names(config.allowed_gpus, await vast.gpu_names())
    found = await vast.search_offers_paged(
        offer_filters(config, prover, names),
        page_size=500,
        max_pages=6,
        allocated_storage=prover.disk_gb,
    )
    items = [
        Item(key=o.id, cost=o.dph_total, rate=offer_row(o)["est_proofs_per_hour"])
        for o in found.offers
        if offer_refusal(o, config, prover) is None
    ]
    ours = [
        Item(
            key=-int(r["id"]), cost=float(r["dph_total"]), rate=float(r["expected_proofs_per_hour"])
        )
        for r in state["instances"]
        if r.get("cur_state") != "unloaded" and not _failed(r)
    ]
    target = config.target_proofs_per_hour
    cover = cheapest_cover(items + ours, target, planning_unit(target))
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
        env = await WorkflowEnvironment.start_time_skipping(
            data_converter=pydantic_data_converter, test_server_existing_path=find_test_server()
        )
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
                    _destroyed_as(day, store, agent_id)
                    counters = sim.market.state()["counters"]
        finally:
            await env.shutdown()
            store.dispose()
    report = _report(path, day, counters, hours, time.monotonic() - started)
    return {"faults": faults, "spare_one_machine": spare, **report}


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
    target = _target_at(0)
    settings = {**CONFIG, "spare_one_machine": spare}
    handle = await h.start_agent(target_proofs_per_hour=target, **settings)
    t0 = sim.market.now()
    config = AgentConfig(target_proofs_per_hour=target, **settings)
    for i in range(int(hours * 3600 // step)):
        hour = i * step / 3600
        wanted = _target_at(hour)
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
        _observe(day, state, now)
        day.samples.append((now, target, float(state["proofs_per_hour"]), state["spend_per_hour"]))
    return str(handle.id)


_DESTROYED = re.compile(
    r"Destroyed instance (\d+) \(.*?, was (\w+)\)\. Reason given: ([^\n|]{0,80})"
)


def _destroyed_as(day: Day, store: Store, agent_id: str) -> None:
    """A machine that died between two samples looks healthy in them: the
    destroy tool's result says what vast.ai listed it as when it went, and
    the reason given says when its prover reported an error."""
    for run in store.list_runs(agent_id, limit=100_000):
        for iid, was, why in _DESTROYED.findall(run.actions_digest or ""):
            life = day.lives.get(int(iid))
            if life is not None:
                life.why = why
            # ... and a prover that reported an error between two samples
            # (its own status, read by the monitor) is gone by the next one.
            failed = (
                f"went {was} between samples"
                if was in ("exited", "offline", "unknown")
                else "prover error between samples"
                if "(prover error:" in why
                else ""
            )
            if life is not None and failed:
                life.healthy_at_destroy = False
                life.failed_at = life.failed_at if life.failed_at is not None else life.destroyed_at
                life.failure = life.failure or failed


def _report(
    path: str, day: Day, counters: dict[str, Any], hours: float, wall: float
) -> dict[str, Any]:
    changes = [h * 3600 for h, _ in TARGETS if h < hours]
    steady = [s for s in day.samples if all(not (c <= s[0] - 0 < c + SETTLE_S) for c in changes)]
    after_first = [s for s in day.samples if s[0] > SETTLE_S]

    def share(samples: list[tuple[float, float, float, float]]) -> float | None:
        if not samples:
            return None
        inside = sum(1 for _, target, cap, _ in samples if abs(cap - target) <= BAND * target)
        return round(inside / len(samples), 4)

    step = day.samples[1][0] - day.samples[0][0] if len(day.samples) > 1 else 0.0
    proofs = sum(cap for _, _, cap, _ in day.samples) * step / 3600
    spend = sum(dph for *_, dph in day.samples) * step / 3600
    # The fleet's $/h once settled in each target period, against the oracle's.
    periods = []
    for k, entry in enumerate(day.oracle):
        start = entry["hour"] * 3600 + SETTLE_S
        end = day.oracle[k + 1]["hour"] * 3600 if k + 1 < len(day.oracle) else hours * 3600
        dphs = [dph for t, _, _, dph in day.samples if start < t <= end]
        mean = sum(dphs) / len(dphs) if dphs else None
        periods.append(
            {
                **entry,
                "fleet_dph": round(mean, 4) if mean is not None else None,
                "ratio": round(mean / entry["oracle_dph"], 3)
                if mean and entry["oracle_dph"]
                else None,
                "ratio_no_rebuild": round(mean / entry["no_rebuild_dph"], 3)
                if mean and entry.get("no_rebuild_dph")
                else None,
                "ratio_spared": round(mean / entry["spared_dph"], 3)
                if mean and entry.get("spared_dph")
                else None,
            }
        )
    failed = [life for life in day.lives.values() if life.failed_at is not None]
    replaced = [
        (life.destroyed_at - life.failed_at)
        for life in failed
        if life.destroyed_at is not None and life.failed_at is not None
    ]
    replacements = _replacements(day)
    # Boots that hang or fail: how long each held its place in the fleet.
    bad_boots = [
        life.destroyed_at - life.created
        for life in day.lives.values()
        if life.boot != "run" and life.destroyed_at is not None
    ]
    thrashed = [
        {"id": iid, "created": life.created, "destroyed": life.destroyed_at, "last": life.last}
        for iid, life in day.lives.items()
        if life.destroyed_at is not None
        and life.healthy_at_destroy
        and life.boot == "run"  # a boot that hangs or fails is not healthy
        and life.destroyed_at - life.created <= THRASH_MINUTES * 60
    ]
    thrash = len(thrashed)
    ratios = [p["ratio"] for p in periods if p["ratio"] is not None]
    return {
        "path": path,
        "hours": hours,
        "wall_seconds": round(wall, 1),
        "within_5pct_after_first_hour": share(after_first),
        "within_5pct_settled": share(steady),
        "mean_capacity_after_first_hour": round(
            sum(s[2] for s in after_first) / max(1, len(after_first)), 1
        ),
        "worst_dph_vs_oracle": max(ratios) if ratios else None,
        "worst_dph_vs_no_rebuild": max(
            (p["ratio_no_rebuild"] for p in periods if p["ratio_no_rebuild"] is not None),
            default=None,
        ),
        # Against the cheapest fleet holding a spare too (None with the spare off).
        "worst_dph_vs_spared_oracle": max(
            (p["ratio_spared"] for p in periods if p["ratio_spared"] is not None),
            default=None,
        ),
        "periods": periods,
        "usd_per_proof": round(spend / proofs, 4) if proofs else None,
        "proofs": round(proofs),
        "spend_usd": round(spend, 2),
        "creates": counters.get("creates"),
        "destroys": counters.get("destroys"),
        "machines_failed": len(failed),
        "failed_destroyed": len(replaced),
        "failure_to_destroy_p50_min": _minutes(_common.percentile(replaced, 50)),
        "failure_to_destroy_max_min": _minutes(max(replaced) if replaced else None),
        # Each failure, the first machine rented after it (its replacement, or
        # one rented for a target change at the same time) and when it proved.
        "replacements": replacements,
        "failure_to_replacement_max_min": _minutes(
            max(
                (r["rented_after_s"] for r in replacements if r["rented_after_s"] is not None),
                default=None,
            )
        ),
        # The same, counted from when the failure could be told (a stall's window).
        "detectable_to_replacement_max_min": _minutes(
            max(
                (
                    r["rented_after_s"] - r["detection_s"]
                    for r in replacements
                    if r["rented_after_s"] is not None
                ),
                default=None,
            )
        ),
        "bad_boots": len(bad_boots),
        "bad_boot_to_destroy_max_min": _minutes(max(bad_boots) if bad_boots else None),
        "thrash": thrash,
        "thrashed": thrashed,
        "lives": [
            {"id": iid, **{k: getattr(life, k) for k in Life.__dataclass_fields__}}
            for iid, life in sorted(day.lives.items())
        ],
        # (seconds, target, proofs/h, $/h) every step: the figures above come from these.
        "samples": [[round(x, 3) for x in sample] for sample in day.samples],
    }


def _replacements(day: Day) -> list[dict[str, Any]]:
    """Pairs each failure with the first machine rented after it was seen."""
    fresh = sorted(day.lives.values(), key=lambda life: life.created)
    used: set[int] = set()
    out = []
    failed = [life for life in day.lives.values() if life.failed_at is not None]
    for life in sorted(failed, key=lambda life: life.failed_at or 0.0):
        assert life.failed_at is not None
        new = next(
            (k for k, n in enumerate(fresh) if k not in used and n.created >= life.failed_at),
            None,
        )
        if new is not None:
            used.add(new)
        repl = fresh[new] if new is not None else None
        out.append(
            {
                "failure": life.failure,
                "at_s": life.failed_at,
                "destroyed_after_s": (
                    life.destroyed_at - life.failed_at if life.destroyed_at is not None else None
                ),
                "rented_after_s": repl.created - life.failed_at if repl else None,
                # The time the rule needs to tell this failure from a slow proof.
                "detection_s": _detection_s(life),
                "replacement_load_s": (
                    repl.proving_at - repl.created
                    if repl is not None and repl.proving_at is not None
                    else None
                ),
            }
        )
    return out


def _detection_s(life: Life) -> float:
    """How long the stall rule must wait before a stalled prover is one: no
    proof for `STALL_INTERVALS` of its proof intervals (at least
    `MIN_STALL_S`), at most the agent's `not_proving_minutes` (the issue's
    "has not proved for a configurable time"). Any other failure shows at once."""
    if life.failure != "prover stuck":
        return 0.0
    limit = AgentConfig(target_proofs_per_hour=1.0, **CONFIG).not_proving_minutes * 60
    if life.rate <= 0:
        return limit
    return min(limit, max(MIN_STALL_S, STALL_INTERVALS * 3600.0 / life.rate))


def _minutes(seconds: float | None) -> float | None:
    return round(seconds / 60, 1) if seconds is not None else None


def _summary(results: list[dict[str, Any]]) -> None:
    """One line per path and fault level across seeds: a single day's figure
    moves by a point or two with the market's path, so judge a change here."""
    print(
        "\nacross seeds (mean, worst): within ±5 % after hour 1 | the same, an hour after "
        "each change | worst $/h ÷ oracle | ÷ keeping the fleet | ÷ the spared oracle | thrash"
    )
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["path"], r["faults"]), []).append(r)

    def low(rs: list[dict[str, Any]], key: str) -> str:
        xs = [float(r[key] or 0.0) for r in rs]
        return f"{100 * sum(xs) / len(xs):.1f} %, {100 * min(xs):.1f} %"

    def high(rs: list[dict[str, Any]], key: str) -> str:
        xs = [float(r[key] or 0.0) for r in rs]
        return f"{sum(xs) / len(xs):.3f}, {max(xs):.3f}"

    for (path, faults), rs in groups.items():
        print(
            f"  {path:<9} {faults:<9} seeds {','.join(str(r['seed']) for r in rs)}: "
            f"{low(rs, 'within_5pct_after_first_hour')} | {low(rs, 'within_5pct_settled')} | "
            f"{high(rs, 'worst_dph_vs_oracle')} | {high(rs, 'worst_dph_vs_no_rebuild')} | "
            f"{high(rs, 'worst_dph_vs_spared_oracle')} | {sum(int(r['thrash']) for r in rs)}"
        )


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
    args = parser.parse_args(argv)
    results = []
    levels = list(FAULT_LEVELS) if args.faults == "both" else [args.faults]
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else [args.seed]
    runs = [(p.strip(), f, s) for s in seeds for f in levels for p in args.paths.split(",")]
    for path, faults, seed in runs:
        result = asyncio.run(
            run_path(
                path, faults, args.hours, seed, args.step, args.min_inet_down, args.spare == "on"
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
                )
            },
        )
        for p in result["periods"]:
            print(
                f"  from hour {p['hour']:>4.1f}: target {p['target']:.0f}, fleet "
                f"${p['fleet_dph']}/h, oracle ${p['oracle_dph']}/h, ratio {p['ratio']}; "
                f"keeping the fleet ${p['no_rebuild_dph']}/h, ratio {p['ratio_no_rebuild']}; "
                f"spared oracle ${p['spared_dph']}/h, ratio {p['ratio_spared']}"
            )
    if len(seeds) > 1:
        _summary(results)
    out = _common.write_json("market_day", {"runs": results}, args.json_out)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
