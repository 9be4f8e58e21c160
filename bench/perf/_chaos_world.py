"""The chaos suite's world: one scenario's processes (a dev server it can
SIGKILL, worker processes, a PostgreSQL store behind a TCP proxy that can
cut it off, the vast.ai simulator and a fake Messages API answering with the
autopilot's decisions), the operator's view of the agent, and the
invariants judged after each scenario (bench/perf/chaos.py)."""

from __future__ import annotations

import asyncio
import itertools
import re
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from bench.perf._chaos_stack import PG_PORT, DevServer, ScratchDatabase, WorkerProcess
from fleet_agent.autopilot.run_view import text_of
from fleet_agent.models import AgentInput, AgentStatus, ConfigPatch
from fleet_agent.store import RunRecord, Store
from simulator import SimServer
from testkit.fakes import FAKE_API_KEY, FakeAnthropic, Reply, Request
from testkit.fakes.autopilot_llm import autopilot_reply
from testkit.fakes.tcp_proxy import TcpProxy
from workflows import FleetAgentWorkflow
from workflows.policies import TASK_QUEUE

RECOVERY_TARGET_S = 45.0
#: The agent's target, proofs/h.
TARGET = 60.0
#: The agent's max_instances: more of its machines at once is outside the rules.
MAX_INSTANCES = 4
#: An operator's message that makes the fake model release a machine (`release_order`).
RELEASE_ORDER = re.compile(r"chaos: release instance (\d+)")
SETTLE_TIMEOUT_S = 180.0
QUICK = ["worker-kill-mid-llm", "store-outage"]
Agent = WorkflowHandle[FleetAgentWorkflow, None]


@dataclass
class Outcome:
    """One scenario's invariants and figures."""

    scenario: str
    duplicate_rentals: int = 0
    max_parallel_runs: int = 0
    lost_messages: int = 0
    duplicated_messages: int = 0
    unrecorded_runs: int = 0
    runs: int = 0
    recovery_s: float | None = None
    recovery_of: str = ""
    # The hostile host's: rentals or destroys the rules do not allow, and
    # windows of a hostile answer in which the monitor finished no poll (or
    # failed a workflow task); `monitor_polls` those it finished meanwhile.
    outside_rules: int = 0
    monitor_stalls: int = 0
    monitor_polls: int | None = None
    # Workflow tasks that failed in any workflow of the run (every history),
    # and what the hostile host's figures did: polls whose capacity was over
    # twice the capacity model's, liars not replaced, hostile drains that
    # held a destroy or were retried (bench/perf/_chaos_hostile.py).
    workflow_task_failures: int = 0
    capacity_breaches: int = 0
    unreplaced_liars: int = 0
    drain_holds: int = 0
    figures: dict[str, Any] = field(default_factory=dict)
    needs_recovery: bool = True
    seconds: float = 0.0
    error: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        invariants = (
            self.duplicate_rentals,
            self.lost_messages,
            self.duplicated_messages,
            self.unrecorded_runs,
            self.outside_rules,
            self.monitor_stalls,
            self.workflow_task_failures,
            self.capacity_breaches,
            self.unreplaced_liars,
            self.drain_holds,
        )
        recovered = not self.needs_recovery or (
            self.recovery_s is not None
            and ("worker" not in self.recovery_of or self.recovery_s <= RECOVERY_TARGET_S)
        )
        return not self.error and not any(invariants) and self.max_parallel_runs <= 1 and recovered


class World:
    """One scenario's processes and the operator's view of the agent."""

    def __init__(self, workdir: Path, outage_s: float, hostile_minutes: float = 60.0) -> None:
        self.workdir = workdir
        self.outage_s = outage_s
        self.hostile_minutes = hostile_minutes
        self.server = DevServer(workdir)
        self.proxy = TcpProxy(PG_PORT)
        self.database = ScratchDatabase()
        # No pacing: these scenarios are about crashes, not about 429s.
        self.sim = SimServer(seed=3, speed=30, scenario="ideal", rate_limits=False)
        self.fake = FakeAnthropic()
        self.llm_delay = 0.3
        self.workers: list[WorkerProcess] = []
        self.sent: list[str] = []
        self.agent_id = f"chaos-{uuid.uuid4().hex[:6]}"
        self._names = itertools.count(1)

    # ------------------------------------------------------------ set-up

    async def __aenter__(self) -> World:
        self.database.__enter__()
        self.proxy.start()
        self.sim.__enter__()
        self.fake.start()
        self.fake.set_responder(self._respond)
        await self.server.start()
        self.client = await self.server.client()
        # The store exists before any worker starts: a worker refuses an empty
        # store once agents run (fleet_agent/store/guard.py).
        self.store = Store(self.database.url(5432))
        self.store.create_all()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for worker in self.workers:
            worker.close()
        self.server.close()
        self.store.dispose()
        self.proxy.cut()
        self.fake.stop()
        self.sim.__exit__(None, None, None)
        self.database.__exit__()

    def _respond(self, req: Request) -> Reply:
        reply = release_order(req) or autopilot_reply(req)
        reply.delay = self.llm_delay
        return reply

    def start_worker(self) -> WorkerProcess:
        worker = WorkerProcess(
            f"worker-{next(self._names)}",
            self.workdir,
            {
                "TEMPORAL_ADDRESS": self.server.address,
                "FLEET_DATABASE_URL": self.database.url(self.proxy.port),
                "FLEET_LLM_PROVIDER": "anthropic",
                "VAST_API_KEY": self.sim.api_key,
                "VAST_API_URL": self.sim.url,
                "FLEET_PROVER_ALLOW_LOOPBACK": "1",  # the simulator's provers
                # ...which serve the sidecar's status: the old path's contract.
                "FLEET_PROVER_MODE": "curio_on_host",
                "FLEET_PROVER_MIN_RAM_GIB": "60",  # the simulated prover's (testkit/sim_helpers.py)
                **self.fake.env(FAKE_API_KEY),
            },
        )
        worker.start()
        self.workers.append(worker)
        return worker

    async def start_agent(self) -> Agent:
        await self.client.start_workflow(
            FleetAgentWorkflow.run,
            AgentInput(
                config=ConfigPatch(
                    target_proofs_per_hour=TARGET,
                    max_instances=MAX_INSTANCES,
                    monitor_poll_seconds=5,
                    p0_debounce_seconds=0.5,
                    p1_debounce_seconds=2,
                )
            ),
            id=self.agent_id,
            task_queue=TASK_QUEUE,
        )
        self.agent = self.client.get_workflow_handle_for(FleetAgentWorkflow.run, self.agent_id)
        return self.agent

    # ------------------------------------------------------------ operator

    async def say(self, text: str = "how is the fleet?") -> str:
        uid = f"msg-{len(self.sent) + 1:03d}-{uuid.uuid4().hex[:6]}"
        await self.agent.signal(FleetAgentWorkflow.human_message, f"{uid}: {text}")
        self.sent.append(uid)
        return uid

    async def status(self) -> AgentStatus | None:
        try:
            return await self.agent.query(FleetAgentWorkflow.status)
        except RPCError:
            return None  # the server or every worker is down for the moment

    def runs(self) -> list[RunRecord]:
        return sorted(
            self.store.run_reads.list_runs(self.agent_id, limit=10_000), key=lambda r: r.run
        )

    def answered(self, uid: str) -> bool:
        return any(uid in t.text and r.status != "running" for r in self.runs() for t in r.triggers)

    async def running_activity(self, name: str) -> tuple[str, int] | None:
        """(worker identity, attempt) of the run's activity `name` while it runs."""
        st = await self.status()
        if st is None or st.current_run is None:
            return None
        run = self.client.get_workflow_handle(f"{self.agent_id}/run-{st.current_run}")
        try:
            described = await run.describe()
        except RPCError:
            return None
        for pending in described.raw_description.pending_activities:
            if pending.activity_type.name == name and pending.last_worker_identity:
                return pending.last_worker_identity, pending.attempt
        return None

    def worker_of(self, identity: str) -> WorkerProcess:
        pid = int(identity.split("@", 1)[0])
        return next(w for w in self.workers if w.pid == pid)

    async def settle(self) -> None:
        """Until every message is answered, nothing waits or runs, and the fleet is at rest."""

        async def quiet() -> bool:
            st = await self.status()
            return (
                st is not None
                and not st.pending_triggers
                and st.current_run is None
                and all(self.answered(uid) for uid in self.sent)
                and all(r.status != "running" for r in self.runs())
            )

        await until(quiet, SETTLE_TIMEOUT_S, "the agent to settle")

    # ------------------------------------------------------------ invariants

    def judge(self, outcome: Outcome) -> None:
        runs = self.runs()
        rentals = self.sim.market.rentals_by_label()
        outcome.duplicate_rentals = sum(
            len(ids) - 1 for label, ids in rentals.items() if label.startswith("fleet-agent/")
        )
        firsts = [r for r in runs if r.attempt == 1]
        outcome.max_parallel_runs = _max_overlap(firsts)
        seen = Counter(
            uid for r in firsts for t in r.triggers for uid in self.sent if uid in t.text
        )
        outcome.lost_messages = sum(1 for uid in self.sent if seen[uid] == 0)
        outcome.duplicated_messages = sum(1 for uid in self.sent if seen[uid] > 1)
        numbers = sorted({r.run for r in runs})
        missing = set(range(1, (numbers[-1] if numbers else 0) + 1)) - set(numbers)
        outcome.unrecorded_runs = len(missing) + sum(1 for r in runs if r.status == "running")
        outcome.runs = len(numbers)
        counters = self.sim.market.state()["counters"]
        outcome.notes.append(
            f"vast.ai: {counters['creates']} rental request(s) ({counters['create_delays']} "
            f"slow), {len(rentals)} machine(s) rented, {counters['destroys']} destroyed; "
            f"LLM: {len(self.fake.requests)} call(s)"
        )
        if self.fake.max_concurrent > 1:
            outcome.notes.append(f"the fake LLM saw {self.fake.max_concurrent} calls at once")


def release_order(req: Request) -> Reply | None:
    """The fake model's answer to an operator's `RELEASE_ORDER` in the run's
    context message: the destroy tool for that machine (what a model does
    when told to), then the autopilot's rounds. None for any other request."""
    last = req.messages[-1] if req.messages else {}
    content = last.get("content")
    if isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    ):
        return None  # a later round of the run: the autopilot goes on
    found = RELEASE_ORDER.search(text_of(content or ""))
    if found is None:
        return None
    iid = int(found.group(1))
    return Reply(
        text=f"Releasing instance {iid} as the operator asked.",
        tool_calls=[
            ("destroy_instance", {"instance_id": iid, "reason": "the operator asked"}),
        ],
    )


def _max_overlap(runs: list[RunRecord]) -> int:
    edges: list[tuple[datetime, int]] = []
    for r in runs:
        if r.ended_at is not None:
            edges += [(r.started_at, 1), (r.ended_at, -1)]
    level = peak = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        level += step
        peak = max(peak, level)
    return peak


async def until(
    probe: Callable[[], Awaitable[Any]], within: float, what: str, interval: float = 0.2
) -> Any:
    deadline = time.monotonic() + within
    while True:
        found = await probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {within:g}s")
        await asyncio.sleep(interval)


async def warm_up(w: World, workers: int = 1) -> None:
    """Workers, the agent, one message, and the agent at rest."""
    for _ in range(workers):
        w.start_worker()
    await w.start_agent()
    await w.say()
    await w.settle()
