"""Context growth: what a long session costs, run after run (issue 9).

Runs one agent for N runs (1,000) on the time-skipping Temporal test server,
the stack of bench/llm_cost/prompt_cache.py (bench/llm_cost/_llm_runs.py: a real worker, the
simulator behind the fleet tools, a SQLite store, the real `AnthropicProvider`
against the fake Messages API whose prompt cache runs on the server's clock).

The scripted model, the mix of bench/llm_cost/prompt_cache.py: ≈80 % of the runs are
heartbeats answered "nothing to do" (no-ops); ≈10 % are heartbeats that look
at the fleet and the market (two tool calls: get_fleet_status and
search_offers, then an answer); ≈10 % answer an operator's message of 1–3 KB
(get_fleet_status, then an answer). Every 100 runs it prints: prompt tokens
per request with our rules and for the naive agent (every message of the
session kept: the store's messages of all runs so far); the share of input
tokens read from the cache on consecutive rounds and runs; the cost per run
and per day; history bytes and events per run, of the agent workflow and of
a run workflow; the time `load_context` takes. At the end it extrapolates to
100,000 runs and prints the issue's target checks. See bench/README.md.

    .venv/bin/python -m bench.llm_cost.context_growth [--runs 1000] [--every 100] [--seed 1]
        [--budget 24000] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHistory

from bench import _common
from bench.llm_cost._context_growth_report import (
    HEARTBEATS_PER_DAY,
    LoadTimes,
    print_row,
    report,
)
from bench.llm_cost._llm_runs import HEARTBEAT_S, AgentStack, agent_stack
from bench.llm_cost.prompt_cache import (
    _RUN,
    ACTED,
    ANSWERED,
    _share,
    _summariser,
    _usage,
    plan,
    windows,
)
from fleet_agent.llm.model_table import DEFAULT_MODEL, EFFORTS, KNOWN_MODELS, cost_usd
from fleet_agent.models import AgentConfig, TokenUsage
from testkit.agents import status
from testkit.fakes import DEFAULT_TEXT, Reply, Request
from testkit.fakes.anthropic_cache import prompt_tokens
from workflows import FleetAgentWorkflow

_SENTENCES = [
    "The RTX 4090 hosts in the Frankfurt region were flaky again overnight and two of them "
    "stopped proving for about forty minutes before they came back on their own.",
    "Finance wants the weekly figures by Thursday: proofs per hour, the fleet's cost per hour "
    "and the spend per proof, with a short note on anything that changed.",
    "We have a customer deadline on Friday, so I would rather keep some headroom than run "
    "the fleet at its exact target over the weekend.",
    "Please do not rent anything with less than 24 GB of VRAM; the last time we tried the "
    "prover ran out of memory on the larger circuits and we lost half a day.",
    "If the price of the A100 offers drops below a dollar an hour, tell me before renting: "
    "we may want to move part of the load there for the batch jobs next week.",
    "The on-call engineer will be away from Saturday to Monday, so anything unusual should "
    "be written down in your answer rather than acted on without approval.",
    "Last month the bill went up by a third while the proof rate stayed flat, and nobody "
    "could explain it from the dashboard alone; I would like your reading of it.",
    "Keep an eye on hosts that restart often: a machine that reboots twice in an hour is "
    "worse than no machine, because the prover loses its warm cache each time.",
]


def message_text(rng: random.Random) -> str:
    """An operator's message of 1–3 KB, from sentences an operator might write."""
    size = rng.randint(1_000, 3_000)
    parts = ["Hello, a few things about the fleet."]
    while sum(len(p) + 1 for p in parts) < size:
        parts.append(rng.choice(_SENTENCES))
    return " ".join(parts)[:size]


def responder(kinds: dict[int, str], rng: random.Random) -> Callable[[Request], Reply]:
    def respond(req: Request) -> Reply:
        found = _RUN.findall(req.all_text())
        kind = kinds.get(int(found[-1]), "noop") if found else "noop"
        if kind == "noop":
            return Reply(text=DEFAULT_TEXT)
        if not req.tool_results():
            if kind == "tool":
                return Reply(
                    text="Checking the fleet and the market.",
                    tool_calls=[("get_fleet_status", {}), ("search_offers", {"limit": 20})],
                )
            return Reply(text="Checking the fleet first.", tool_calls=[("get_fleet_status", {})])
        if kind == "tool":
            return Reply(
                text="The fleet is empty and the target is 0 proofs/hour, so there is nothing "
                "to rent or release. The cheapest offers are listed above; none is needed. "
                f"I will look again at the next heartbeat.\n{ACTED}"
            )
        answer = rng.choice(
            [
                "No machine is rented at the moment: the target is 0 proofs/hour, so the fleet "
                "costs nothing and proves nothing. Nothing looks unhealthy, and I noted your "
                "constraints on VRAM, approvals and the weekend for later.",
                "Nothing changed since my last check: no instance, no spend. I will tell you as "
                "soon as a machine stops proving or a host looks flaky, and I will ask before "
                "renting anything, as you asked.",
            ]
        )
        return Reply(text=f"{answer}\n{ANSWERED}")

    return respond


def _bytes(history: WorkflowHistory) -> int:
    """The history's size as the server counts it: its events' protobuf bytes."""
    return sum(e.ByteSize() for e in history.events)


class Sampler:
    """What is measured after every run, and the row printed every `every` runs."""

    def __init__(self, args: argparse.Namespace, stack: AgentStack, kinds: dict[int, str]):
        self.args = args
        self.stack = stack
        self.kinds = kinds
        self.info = KNOWN_MODELS[DEFAULT_MODEL]
        self.loads = LoadTimes()
        # Naive agent: tokens of every stored message of runs 1..n.
        self.naive_messages: dict[int, int] = {0: 0}
        # Agent workflow: history length and bytes after each run.
        self.agent_prev: tuple[int, int] | None = None
        self.agent_delta: dict[int, tuple[int, int]] = {}
        self.continued_as_new = 0
        self.last_tool_run = 0
        self.rows: list[dict[str, Any]] = []
        self.budget_filled_at: int | None = None

    async def after_run(self, run: int) -> None:
        store, agent = self.stack.store, self.stack.handle.id
        msgs = store.messages.run_messages(agent, run)
        self.naive_messages[run] = self.naive_messages[run - 1] + sum(
            prompt_tokens({"messages": [{"role": m.role, "content": m.content}]}) for m in msgs
        )
        st = await status(self.stack.handle)
        now = (st.history_length, st.history_bytes)
        if self.agent_prev is not None:
            if now[0] < self.agent_prev[0]:
                # Continued as new: count the new execution's events so far.
                self.continued_as_new += 1
                self.agent_delta[run] = now
            else:
                self.agent_delta[run] = (now[0] - self.agent_prev[0], now[1] - self.agent_prev[1])
        self.agent_prev = now
        if self.kinds[run] == "tool":
            self.last_tool_run = run
        if run % self.args.every == 0 or run == self.args.runs:
            await self.sample(run)

    async def _run_history(self, run: int) -> tuple[int, int] | None:
        if run < 1:
            return None
        h = await self.stack.env.client.get_workflow_handle(
            f"{self.stack.handle.id}/run-{run}"
        ).fetch_history()
        return _bytes(h), len(h.events)

    def _overhead(self, requests: list[Request]) -> int:
        """Tokens of tools and system prompt, as the fake counts them."""
        body = requests[-1].body
        return prompt_tokens({"tools": body.get("tools"), "system": body.get("system")})

    async def sample(self, run: int) -> None:
        every = self.args.every
        first = (run - 1) // every * every + 1
        n_runs = run - first + 1
        all_requests = list(self.stack.fake.requests)
        # Assign each request to the run it belongs to; a summariser's request
        # goes to the run being prepared when it was made.
        current = 0
        in_window: list[Request] = []
        by_run: list[tuple[int, Request]] = []
        for req in all_requests:
            if not _summariser(req):
                found = _RUN.findall(req.all_text())
                current = int(found[-1]) if found else current
            by_run.append((current, req))
            if first <= current <= run:
                in_window.append(req)
        rounds = [r for r in in_window if not _summariser(r)]
        w = next(x for x in windows(rounds, every) if x.first_run == first)
        total = sum((_usage(r) for r in in_window), TokenUsage())
        overhead = self._overhead(rounds)
        naive_in = sum(
            overhead + self.naive_messages.get(r, self.naive_messages[run])
            for r, req in by_run
            if first <= r <= run and not _summariser(req)
        )
        naive = TokenUsage(input_tokens=naive_in, output_tokens=w.total.output_tokens)
        agent = [self.agent_delta[r] for r in range(first, run + 1) if r in self.agent_delta]
        latest = await self._run_history(run)
        tool_run = await self._run_history(self.last_tool_run)
        usd = cost_usd(total, self.info) / n_runs
        row = {
            "runs": f"{first}-{run}",
            "requests": w.requests,
            "prompt_tokens_per_request": round(w.total.prompt_tokens / w.requests),
            "max_prompt_tokens": max(_usage(r).prompt_tokens for r in rounds),
            "naive_tokens_per_request": round(naive_in / w.requests),
            "naive_tokens_at_run": overhead + self.naive_messages[run],
            "cached_share": _share(w.rounds + w.starts),
            "usd_per_run": usd,
            "usd_per_day": usd * self.runs_per_day,
            "naive_usd_per_run": cost_usd(naive, self.info) / n_runs,
            "summariser_requests": len(in_window) - len(rounds),
            "agent_bytes_per_run": round(sum(b for _, b in agent) / len(agent)) if agent else None,
            "agent_events_per_run": round(sum(e for e, _ in agent) / len(agent), 1)
            if agent
            else None,
            "run": run,
            "run_kind": self.kinds[run],
            "run_history_bytes": latest[0] if latest else None,
            "run_history_events": latest[1] if latest else None,
            "tool_run": self.last_tool_run,
            "tool_run_history_bytes": tool_run[0] if tool_run else None,
            "tool_run_history_events": tool_run[1] if tool_run else None,
            "load_context_ms": 1000 * self.loads.activity.get(run, 0.0),
            "history_read_ms": 1000 * self.loads.read.get(run, 0.0),
        }
        self.rows.append(row)
        print_row(row, header=len(self.rows) == 1)

    @property
    def runs_per_day(self) -> float:
        """288 heartbeats a day, plus the runs operators' messages start at the
        mix's share: heartbeats (no-ops and looks at the fleet) are 1 − h of
        the runs, so a day holds 288 / (1 − h)."""
        humans = sum(1 for k in self.kinds.values() if k == "human") / len(self.kinds)
        return HEARTBEATS_PER_DAY / (1 - humans)


async def drive(
    stack: AgentStack,
    kinds: dict[int, str],
    rng: random.Random,
    after_run: Callable[[int], Awaitable[None]],
) -> None:
    """Make each run happen (a heartbeat, or an operator's message), then measure."""
    env, handle, store = stack.env, stack.handle, stack.store

    async def finished(n: int) -> None:
        deadline = time.monotonic() + 120
        while True:
            rec = store.run_reads.get_run(handle.id, n)
            if rec is not None and rec.status != "running":
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {n} did not finish")
            await asyncio.sleep(0.02)

    await env.sleep(11)  # the start-up window
    await finished(1)
    await after_run(1)
    for run in range(2, len(kinds) + 1):
        if kinds[run] == "human":
            await env.sleep(rng.uniform(30, 240))
            await handle.signal(FleetAgentWorkflow.human_message, {"text": message_text(rng)})
            await env.sleep(3)
        else:
            await env.sleep(HEARTBEAT_S + 1)
        await finished(run)
        await after_run(run)


async def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    wall = time.monotonic()
    kinds = plan(args.runs, args.seed)
    rng = random.Random(args.seed + 1)
    async with agent_stack(
        seed=args.seed,
        budget=args.budget,
        respond=responder(kinds, random.Random(args.seed + 2)),
        prefix="context-growth",
        effort=args.effort,
    ) as stack:
        sampler = Sampler(args, stack, kinds)
        sampler.loads.install()
        await drive(stack, kinds, rng, sampler.after_run)
        requests = list(stack.fake.requests)
        summaries = stack.store.summaries.session_summaries(stack.handle.id, 1)
        # The run whose prompt first left runs out: the history budget was full.
        sampler.budget_filled_at = summaries[0].made_by_run if summaries else None
    return report(args, sampler, requests, time.monotonic() - wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--runs", type=int, default=1000, help="runs to make (1000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the run mix (1)")
    parser.add_argument("--every", type=int, default=100, help="runs per printed row (100)")
    parser.add_argument(
        "--budget", type=int, default=24_000, help="history_token_budget (24000, the default)"
    )
    parser.add_argument(
        "--effort",
        choices=EFFORTS,
        default=AgentConfig().llm_effort,
        help=f"the agent's llm_effort ({AgentConfig().llm_effort}, the default config)",
    )
    parser.add_argument("--json-out", type=Path, help="default bench/results/…-<time>.json")
    args = parser.parse_args(argv)
    if args.runs < 20 or args.every < 1:
        parser.error("--runs must be ≥ 20 and --every ≥ 1")
    title = (
        f"context growth: {args.runs} runs (seed {args.seed}, budget {args.budget}, "
        f"effort {args.effort}, {DEFAULT_MODEL} prices)"
    )
    print(f"\n{title}\n{'-' * len(title)}", flush=True)
    result = asyncio.run(run_bench(args))
    path = _common.write_json("context_growth", result, args.json_out)
    ex = result["extrapolation"]
    _common.print_table(
        f"extrapolated to {ex['runs']:,} runs ({ex['model']}); "
        f"{result['runs_per_day']:.0f} runs a day",
        {k: v for k, v in ex.items() if k not in ("runs", "model")},
    )
    _common.print_table(
        "totals",
        {
            k: result[k]
            for k in (
                "requests",
                "summariser_requests",
                "usd_total",
                "usd_thinking",
                "thinking_tokens_per_request",
                "naive_usd_total",
                "cached_share_consecutive",
                "agent_continued_as_new",
                "wall_s",
            )
        },
    )
    print("\ntargets\n-------")
    for name, check in result["checks"].items():
        print(f"{'met   ' if check['met'] else 'MISSED'}  {name:<28} {check['value']}")
    print(f"\nJSON: {path}")
    return 0 if all(c["met"] for c in result["checks"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
