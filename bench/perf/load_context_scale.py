"""load_context at scale: its time at run 10 and at run 10,000 of one session (issue 9).

bench/llm_cost/context_growth.py runs 1,000 whole runs through Temporal; ten times as
many would take hours there, and its load_context figures share two cores with
the test server, the worker and the fake LLM. This one drives the same store
code without Temporal: for each of N runs (10,000) of one session it calls the
real activities in order, as the run workflow does:

1. `RunLogActivities.load_context` (timed: the figure this bench is about);
2. the reply written to the store as `call_llm` would (one round, no LLM);
3. `RunLogActivities.record_run`;
4. `CompactActivities.compact_session` whenever load_context said runs wait
   to be folded, with the autopilot provider (it cannot summarise, so the
   deterministic digest is written, as in an LLM-less deployment).

The mix is context_growth's: ≈80 % no-op heartbeats (not in the prompt),
≈10 % runs with two tool calls' worth of actions, ≈10 % operator messages of
1–3 KB. Runs start 270 s apart (321 a day), so the 24-hour LLM cost that
load_context sums covers ~320 runs once the session is a day old. No fleet is
connected (`NoFleet`): the fleet view costs the same at any run number.

It prints the median load_context time over the 21 runs around each
checkpoint (10, 100, 1,000, 10,000), wall and CPU, and the target check (run
10,000 within 20 % of run 10), and writes JSON. The check is on CPU time: the
wall time of a 15 ms call on a shared two-core machine moves by more than the
20 % it is about (other processes, SQLite's fsync); CPU time is what grows
when a query reads more rows.

    .venv/bin/python -m bench.perf.load_context_scale [--runs 10000] [--seed 1] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from activities.compact import CompactActivities
from activities.runlog import RunLogActivities
from bench import _common
from bench.llm_cost.context_growth import message_text
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.llm.model_table import DEFAULT_MODEL
from fleet_agent.llm.transcript import StoredReply, assistant_seq
from fleet_agent.models import (
    AgentConfig,
    CompactRequest,
    LoadContextRequest,
    RecordRunRequest,
    RunInput,
    RunResult,
    RunStatus,
    TokenUsage,
    Trigger,
    TriggerKind,
)
from fleet_agent.store import Store

AGENT = "scale"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN_SPACING = timedelta(seconds=270)
CHECKPOINTS = (10, 100, 1_000, 10_000)
SPAN = 10  # runs on each side of a checkpoint whose median stands for it
TARGET_LOAD = 0.20


def _trigger(kind: str, run: int, rng: random.Random) -> Trigger:
    if kind == "message":
        return Trigger(
            seq=run,
            kind=TriggerKind.HUMAN_MESSAGE,
            received_at=T0 + run * RUN_SPACING,
            author="alice",
            text=message_text(rng),
        )
    return Trigger(seq=run, kind=TriggerKind.HEARTBEAT, received_at=T0 + run * RUN_SPACING)


def _answer(kind: str, run: int) -> str:
    if kind == "noop":
        return "Nothing to do: the fleet is on target."
    return (
        f"Run {run}: the fleet holds 498 proofs/h against 500 at $6.12/h. Two RTX 4090 offers "
        "at $0.31/h would lower the cost per proof; nothing rented, the margin is too small."
    )


async def one_run(
    env: ActivityEnvironment,
    runlog: RunLogActivities,
    compact: CompactActivities,
    store: Store,
    run: int,
    kind: str,
    rng: random.Random,
) -> tuple[float, float]:
    """One run's activities in the run workflow's order; the load_context
    seconds, wall and CPU (the process's, all threads: the store calls run in
    a thread)."""
    started = T0 + run * RUN_SPACING
    wf_run = str(uuid.uuid4())
    config = AgentConfig()
    inp = RunInput(
        agent_id=AGENT, run=run, session=1, triggers=[_trigger(kind, run, rng)], config=config
    )
    t, cpu = time.perf_counter(), time.process_time()
    context = await env.run(
        runlog.load_context,
        LoadContextRequest(run_input=inp, started_at=started, workflow_run_id=wf_run),
    )
    seconds = (time.perf_counter() - t, time.process_time() - cpu)
    if context.compaction_due:
        await env.run(
            compact.compact_session,
            CompactRequest(
                agent_id=AGENT,
                session=1,
                run=run,
                history_token_budget=config.history_token_budget,
            ),
        )
    usage = TokenUsage(input_tokens=300, output_tokens=120, cache_read_input_tokens=9_000)
    reply = StoredReply(
        content=[{"type": "text", "text": _answer(kind, run)}],
        stop_reason="end_turn",
        usage=usage,
        model=DEFAULT_MODEL,
        seconds=1.5,
    )
    store.messages.add_message(
        AGENT, run, assistant_seq(1), 1, "assistant", "assistant", reply.model_dump_json(), started
    )
    tools = 2 if kind == "tools" else (1 if kind == "message" else 0)
    result = RunResult(
        run=run,
        status=RunStatus.OK,
        noop=kind == "noop",
        in_prompt=kind != "noop",
        usage=usage,
        tool_calls=tools,
        rounds=1 + (tools > 0),
        llm_seconds=1.5,
        started_at=started,
        ended_at=started + timedelta(seconds=4),
    )
    await env.run(
        runlog.record_run,
        RecordRunRequest(
            agent_id=AGENT,
            session=1,
            result=result,
            final_round=1,
            context=context,
            workflow_run_id=wf_run,
        ),
    )
    return seconds


async def run_bench(args: argparse.Namespace, url: str) -> dict[str, Any]:
    store = Store(url)
    store.create_all()
    runlog = RunLogActivities(store)
    compact = CompactActivities(store, AutopilotProvider())
    env = ActivityEnvironment()
    rng = random.Random(args.seed)
    times: dict[int, tuple[float, float]] = {}
    began = time.perf_counter()
    for run in range(1, args.runs + 1):
        roll = rng.random()
        kind = "noop" if roll < 0.8 else ("tools" if roll < 0.9 else "message")
        times[run] = await one_run(env, runlog, compact, store, run, kind, rng)
        if run % 1_000 == 0:
            wall_s, cpu_s = times[run]
            print(f"  run {run}: {1000 * wall_s:.1f} ms ({1000 * cpu_s:.1f} ms CPU)", flush=True)
    summary = store.summaries.latest_summary(AGENT, 1)
    store.dispose()
    wall: dict[int, float] = {}
    cpu: dict[int, float] = {}
    for point in (p for p in CHECKPOINTS if p <= args.runs):
        around = [times[r] for r in range(point - SPAN, point + SPAN + 1) if r in times]
        wall[point] = 1000 * statistics.median(w for w, _ in around)
        cpu[point] = 1000 * statistics.median(c for _, c in around)
    first, last = min(cpu), max(cpu)
    ratio = cpu[last] / cpu[first] - 1
    return {
        "args": vars(args),
        "backend": url.split(":", 1)[0],
        "load_context_ms_median": wall,
        "load_context_cpu_ms_median": cpu,
        "summary_upto_run": summary.upto_run if summary else 0,
        "wall_s": round(time.perf_counter() - began, 1),
        "check": {
            "value": f"{cpu[last]:.1f} ms CPU at run {last} vs {cpu[first]:.1f} ms at run "
            f"{first} ({100 * ratio:+.1f} %)",
            "met": ratio <= TARGET_LOAD,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--runs", type=int, default=10_000, help="runs of the session (10000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the run mix (1)")
    parser.add_argument("--json-out", type=Path, help="default bench/results/…-<time>.json")
    args = parser.parse_args(argv)
    if args.runs < 2 * SPAN + CHECKPOINTS[0]:
        parser.error(f"--runs must be ≥ {2 * SPAN + CHECKPOINTS[0]}")
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/scale.db"
        title = f"load_context at scale: {args.runs} runs, {url.split(':', 1)[0]}"
        print(f"\n{title}\n{'-' * len(title)}", flush=True)
        result = asyncio.run(run_bench(args, url))
    cpu = result["load_context_cpu_ms_median"]
    rows = {
        f"run {p:,}": f"{ms:.1f} ms wall, {cpu[p]:.1f} ms CPU"
        for p, ms in result["load_context_ms_median"].items()
    }
    rows["summary covers runs to"] = result["summary_upto_run"]
    rows["wall"] = f"{result['wall_s']} s"
    _common.print_table(f"load_context, median of the {2 * SPAN + 1} runs around each", rows)
    check = result["check"]
    print(f"\n{'met   ' if check['met'] else 'MISSED'}  load_context flat  {check['value']}")
    print(f"\nJSON: {_common.write_json('load_context_scale', result, args.json_out)}")
    return 0 if check["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
