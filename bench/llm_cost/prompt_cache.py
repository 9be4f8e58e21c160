"""Prompt cache: how much of each prompt is read from the cache, run after run.

Runs one agent for N runs (100) on the time-skipping Temporal test server with
a real worker (the simulator behind the fleet tools, a SQLite store in a
temporary directory) and the real `AnthropicProvider` talking to the fake
Messages API, whose prompt cache accounts writes, reads and TTLs like the real
one (testkit/fakes/anthropic_cache.py). The fake's clock is the Temporal
server's: a run five simulated minutes after the previous one finds a
5-minute entry expired, as the real API would.

The scripted model: ≈80 % of the runs are heartbeats answered "nothing to
do" (no-ops, left out of later prompts), ≈10 % look at the fleet
(get_fleet_status, then a final answer: two rounds, kept in the prompt) and
≈10 % answer an operator's message. Every 20 runs it prints the prompt tokens
per request and the share read from the cache: on later rounds of a run, and
on the first round of each run (read from the runs before). See bench/README.md.

    .venv/bin/python -m bench.llm_cost.prompt_cache [--runs 100] [--seed 1] [--budget 24000]
        [--stable-ttl 1h|5m] [--sliding] [--every 20]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

import activities.llm
import fleet_agent.llm.history
from bench import _common
from bench.llm_cost._llm_runs import HEARTBEAT_S, agent_stack
from fleet_agent.llm.model_table import DEFAULT_MODEL, EFFORTS, KNOWN_MODELS, cost_usd
from fleet_agent.llm.prompt_cache import cached_request
from fleet_agent.models import AgentConfig, TokenUsage
from fleet_agent.store import Store
from testkit.fakes import DEFAULT_TEXT, Reply, Request
from workflows import FleetAgentWorkflow

TARGET_SHARE = 0.70
ACTED = '<verdict>{"action": true, "state_changed": false}</verdict>'
ANSWERED = '<verdict>{"action": false, "state_changed": false}</verdict>'
_RUN = re.compile(r"\[run #(\d+) · session")
QUESTIONS = [
    "How many proofs per hour are we doing right now, and what does the fleet cost per hour? "
    "I need the figures for the weekly report, so please be precise about both.",
    "We have a customer deadline on Friday. Is there anything in the fleet that looks unhealthy "
    "or stuck, and would you change anything before the weekend? Keep the answer short.",
    "The finance team asks why the bill went up last week. Can you explain which machines you "
    "rented and released, and whether the spend per proof got better or worse?",
    "Please keep an eye on the RTX 4090 hosts in particular: two of them were flaky yesterday. "
    "Tell me if you see any of them stop proving again.",
]


def plan(runs: int, seed: int) -> dict[int, str]:
    """The kind of each run: "noop" (≈80 %), "tool" or "human"; run 1 (the
    start-up run) looks at the fleet."""
    rng = random.Random(seed)
    kinds = {1: "tool"}
    for run in range(2, runs + 1):
        roll = rng.random()
        kinds[run] = "noop" if roll < 0.8 else "tool" if roll < 0.9 else "human"
    return kinds


def responder(kinds: dict[int, str], rng: random.Random) -> Any:
    def respond(req: Request) -> Reply:
        found = _RUN.findall(req.all_text())
        kind = kinds.get(int(found[-1]), "noop") if found else "noop"
        if kind == "tool" and not req.tool_results():
            return Reply(text="Checking the fleet first.", tool_calls=[("get_fleet_status", {})])
        if kind == "tool":
            return Reply(
                text="The fleet is empty and the target is 0 proofs/hour, so there is nothing "
                "to rent or release. I looked at every instance state and the spend: $0.00/h. "
                f"I will look again at the next heartbeat.\n{ACTED}"
            )
        if kind == "human":
            answer = rng.choice(
                [
                    "No machine is rented at the moment: the target is 0 proofs/hour, so the "
                    "fleet costs nothing and proves nothing. Nothing looks unhealthy.",
                    "Nothing changed since my last check: no instance, no spend. I will tell you "
                    "as soon as a machine stops proving or a host looks flaky.",
                ]
            )
            return Reply(text=f"{answer}\n{ANSWERED}")
        return Reply(text=DEFAULT_TEXT)

    return respond


@dataclass
class Window:
    """Usage of the requests of a range of runs."""

    first_run: int
    requests: int = 0
    rounds: TokenUsage = field(default_factory=TokenUsage)  # rounds ≥ 2 of a run
    starts: TokenUsage = field(default_factory=TokenUsage)  # round 1 of runs ≥ 2
    total: TokenUsage = field(default_factory=TokenUsage)


def _usage(req: Request) -> TokenUsage:
    u = req.usage or {}
    return TokenUsage(
        input_tokens=u.get("input_tokens", 0),
        output_tokens=u.get("output_tokens", 0),
        cache_read_input_tokens=u.get("cache_read_input_tokens", 0),
        cache_creation_input_tokens=u.get("cache_creation_input_tokens", 0),
        cache_creation_1h_input_tokens=u.get("cache_creation", {}).get(
            "ephemeral_1h_input_tokens", 0
        ),
        thinking_tokens=u.get("output_tokens_details", {}).get("thinking_tokens", 0),
    )


def _share(u: TokenUsage) -> float | None:
    return u.cache_read_input_tokens / u.prompt_tokens if u.prompt_tokens else None


def windows(requests: list[Request], every: int) -> list[Window]:
    """Group the requests by run windows of `every` runs; round = order in its run."""
    out: dict[int, Window] = {}
    seen: dict[int, int] = {}
    for req in requests:
        found = _RUN.findall(req.all_text())
        run = int(found[-1]) if found else 0
        seen[run] = seen.get(run, 0) + 1
        start = (run - 1) // every * every + 1
        w = out.setdefault(start, Window(first_run=start))
        usage = _usage(req)
        w.requests += 1
        w.total += usage
        if seen[run] > 1:
            w.rounds += usage
        elif run > 1:
            w.starts += usage
    return [out[k] for k in sorted(out)]


async def drive(
    env: WorkflowEnvironment,
    handle: WorkflowHandle[Any, Any],
    store: Store,
    kinds: dict[int, str],
    rng: random.Random,
) -> None:
    """Make each run happen: a heartbeat, or an operator's message."""

    async def finished(n: int) -> None:
        deadline = time.monotonic() + 120
        while (
            len(
                [
                    r
                    for r in store.run_reads.list_runs(handle.id, limit=n + 5)
                    if r.status != "running"
                ]
            )
            < n
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {n} did not finish")
            await asyncio.sleep(0.05)

    await env.sleep(11)  # the start-up window
    await finished(1)
    for run in range(2, len(kinds) + 1):
        if kinds[run] == "human":
            await env.sleep(rng.uniform(30, 240))
            await handle.signal(FleetAgentWorkflow.human_message, {"text": rng.choice(QUESTIONS)})
            await env.sleep(3)
        else:
            await env.sleep(HEARTBEAT_S + 1)
        await finished(run)


async def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    wall = time.monotonic()
    kinds = plan(args.runs, args.seed)
    rng = random.Random(args.seed + 1)
    if args.sliding:
        # The comparison only: every run is a block of its own, so the
        # window slides by one run whenever the budget is full.
        vars(fleet_agent.llm.history)["BLOCKS_PER_BUDGET"] = 10**9
    if args.stable_ttl != "1h":
        # The comparison only: the activity lays the request out with this TTL
        # on the stable breakpoints instead of the hour it uses.
        vars(activities.llm)["cached_request"] = functools.partial(
            cached_request, stable_ttl=args.stable_ttl
        )
    async with agent_stack(
        seed=args.seed,
        budget=args.budget,
        respond=responder(kinds, rng),
        prefix="prompt-cache",
        effort=args.effort,
    ) as stack:
        await drive(stack.env, stack.handle, stack.store, kinds, rng)
        runs = stack.store.run_reads.list_runs(stack.handle.id, limit=args.runs + 10)
    return report(args, stack.fake.requests, runs, kinds, time.monotonic() - wall)


def _summariser(req: Request) -> bool:
    """A compaction request (activities/compact.py), not a round of a run."""
    return "rolling summary" in req.system_text()


def report(
    args: argparse.Namespace,
    requests: list[Request],
    runs: list[Any],
    kinds: dict[int, str],
    wall_s: float,
) -> dict[str, Any]:
    info = KNOWN_MODELS[DEFAULT_MODEL]
    summariser = [r for r in requests if _summariser(r)]
    requests = [r for r in requests if not _summariser(r)]
    rows = []
    for w in windows(requests, args.every):
        uncached = TokenUsage(
            input_tokens=w.total.prompt_tokens, output_tokens=w.total.output_tokens
        )
        n_runs = len([r for r in range(w.first_run, w.first_run + args.every) if r in kinds])
        rows.append(
            {
                "runs": f"{w.first_run}-{w.first_run + n_runs - 1}",
                "requests": w.requests,
                "prompt_tokens_per_request": round(w.total.prompt_tokens / w.requests),
                "read_share": _share(w.total),
                "read_share_later_rounds": _share(w.rounds),
                "read_share_run_starts": _share(w.starts),
                "written_tokens": w.total.cache_creation_input_tokens,
                "usd_per_run": cost_usd(w.total, info) / n_runs,
                "usd_per_run_uncached": cost_usd(uncached, info) / n_runs,
            }
        )
    total = sum((_usage(r) for r in requests), TokenUsage())
    consecutive = sum((w.rounds + w.starts for w in windows(requests, args.every)), TokenUsage())
    share = _share(consecutive) or 0.0
    return {
        "windows": rows,
        "requests": len(requests),
        "runs": len(runs),
        "runs_in_prompt": sum(1 for r in runs if r.in_prompt),
        "prompt_tokens": total.prompt_tokens,
        "cache_read_tokens": total.cache_read_input_tokens,
        "cache_written_tokens": total.cache_creation_input_tokens,
        "cache_written_1h_tokens": total.cache_creation_1h_input_tokens,
        "read_share_all": _share(total),
        "read_share_consecutive": share,
        "target_met": share >= TARGET_SHARE,
        "usd_total": cost_usd(total, info),
        "usd_per_run": cost_usd(total, info) / max(len(runs), 1),
        "output_tokens": total.output_tokens,
        "thinking_tokens": total.thinking_tokens,
        "thinking_tokens_per_request": total.thinking_tokens / max(len(requests), 1),
        "usd_thinking": total.thinking_tokens * info.output / 1e6,
        "usd_total_uncached": cost_usd(
            TokenUsage(input_tokens=total.prompt_tokens, output_tokens=total.output_tokens), info
        ),
        "max_history_runs_included": max((r.history_runs_included for r in runs), default=0),
        "summariser_requests": len(summariser),
        "usd_summariser": cost_usd(sum((_usage(r) for r in summariser), TokenUsage()), info),
        "wall_s": wall_s,
        "args": {
            "runs": args.runs,
            "seed": args.seed,
            "every": args.every,
            "budget": args.budget,
            "stable_ttl": args.stable_ttl,
            "sliding": args.sliding,
            "model": DEFAULT_MODEL,
            "effort": args.effort,
        },
    }


def _fmt(value: Any, pct: bool = False) -> str:
    if value is None:
        return "–"
    if pct:
        return f"{100 * value:.1f} %"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def print_windows(rows: list[dict[str, Any]]) -> None:
    head = [
        ("runs", "runs", False),
        ("req", "requests", False),
        ("prompt tok/req", "prompt_tokens_per_request", False),
        ("read: all", "read_share", True),
        ("read: rounds ≥ 2", "read_share_later_rounds", True),
        ("read: run starts", "read_share_run_starts", True),
        ("written tok", "written_tokens", False),
        ("$/run", "usd_per_run", False),
        ("$/run uncached", "usd_per_run_uncached", False),
    ]
    cells = [[_fmt(r[key], pct) for _, key, pct in head] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, (h, _, _) in enumerate(head)]
    print(" | ".join(h.ljust(w) for (h, _, _), w in zip(head, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for c in cells:
        print(" | ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=f"python -m {__spec__.name}", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--runs", type=int, default=100, help="runs to make (100)")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the run mix (1)")
    parser.add_argument("--every", type=int, default=20, help="runs per printed row (20)")
    parser.add_argument(
        "--budget", type=int, default=24_000, help="history_token_budget (24000, the default)"
    )
    parser.add_argument(
        "--stable-ttl",
        choices=["1h", "5m"],
        default="1h",
        help="TTL of the stable breakpoints (1h, what the agent sends; 5m to compare)",
    )
    parser.add_argument(
        "--sliding",
        action="store_true",
        help="to compare: a history window that slides by one run instead of moving in blocks",
    )
    parser.add_argument(
        "--effort",
        choices=EFFORTS,
        default=AgentConfig().llm_effort,
        help=f"the agent's llm_effort ({AgentConfig().llm_effort}, the default config)",
    )
    parser.add_argument("--json-out", type=Path, help="default bench/results/…-<time>.json")
    args = parser.parse_args(argv)
    if args.runs < 2 or args.every < 1:
        parser.error("--runs must be ≥ 2 and --every ≥ 1")
    result = asyncio.run(run_bench(args))
    path = _common.write_json("prompt_cache", result, args.json_out)
    title = (
        f"prompt cache: {args.runs} runs (seed {args.seed}, budget {args.budget}, "
        f"stable TTL {args.stable_ttl}{', sliding history' if args.sliding else ''}, "
        f"effort {args.effort}, {DEFAULT_MODEL} prices)"
    )
    print(f"\n{title}\n{'-' * len(title)}")
    print_windows(result["windows"])
    _common.print_table(
        "totals",
        {
            k: result[k]
            for k in (
                "requests",
                "runs",
                "runs_in_prompt",
                "prompt_tokens",
                "cache_read_tokens",
                "cache_written_tokens",
                "read_share_all",
                "read_share_consecutive",
                "target_met",
                "usd_total",
                "usd_per_run",
                "output_tokens",
                "thinking_tokens",
                "thinking_tokens_per_request",
                "usd_thinking",
                "usd_total_uncached",
                "max_history_runs_included",
                "summariser_requests",
                "usd_summariser",
                "wall_s",
            )
        },
    )
    print(f"\nJSON: {path}")
    return 0 if result["target_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
