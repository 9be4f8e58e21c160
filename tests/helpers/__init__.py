"""Test helpers: a worker on a unique task queue, polling with a deadline."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import os
import signal
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast, overload

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from fleet_agent.models import (
    AgentConfig,
    AgentStatus,
    FleetToolRequest,
    PendingApproval,
    Phase,
    RunStatus,
    TokenUsage,
)
from fleet_agent.store import RunRecord, Store
from testkit.agents import ASKS_EVERY_CREATE as ASKS_EVERY_CREATE
from testkit.agents import Harness as Harness
from testkit.agents import running_worker as running_worker
from testkit.agents import status as status
from testkit.agents import status_or_none as status_or_none
from testkit.fakes.scripts import json_rows as json_rows
from workflows import FleetAgentWorkflow

T = TypeVar("T")


@overload
async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    timeout: float = ...,
    interval: float = ...,
    what: str = ...,
) -> T: ...
@overload
async def eventually(
    probe: Callable[[], T | None], *, timeout: float = ..., interval: float = ..., what: str = ...
) -> T: ...
async def eventually(
    probe: Callable[[], Any],
    *,
    timeout: float = 30.0,
    interval: float = 0.05,
    what: str = "condition",
) -> T:
    """Poll `probe` (sync or async) until it returns a truthy value or the
    deadline passes; that value."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while True:
        value = probe()
        last = await value if inspect.isawaitable(value) else value
        if last:
            return cast(T, last)
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval)


async def message_after_a_reset(
    handle: WorkflowHandle[FleetAgentWorkflow, None], text: str
) -> None:
    """Send a human message just after a signal that continues the agent as
    new. The time-skipping test server's continue-as-new is not atomic
    (temporalio/sdk-java#1538): a signal sent while it happens can be refused
    as NOT_FOUND "Completed workflow", undelivered; it is sent again. The dev
    server and a real one deliver it to the new execution."""
    for attempt in range(50):
        try:
            await handle.signal(FleetAgentWorkflow.human_message, text)
            return
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND or attempt == 49:
                raise
            await asyncio.sleep(0.1)


async def status_after(handle: WorkflowHandle[FleetAgentWorkflow, None], run: int) -> AgentStatus:
    """Status once the agent has taken in the result of `run`: the run closes
    its store record a moment before the parent workflow hears it finished."""

    async def probe() -> AgentStatus | None:
        st = await status(handle)
        return st if st.last_run is not None and st.last_run.run >= run else None

    found = await eventually(probe, what=f"the agent to take in run {run}")
    assert found is not None
    return found


async def status_between_runs(handle: WorkflowHandle[FleetAgentWorkflow, None]) -> AgentStatus:
    """Status once no run is in flight and the agent has taken in every run
    it started: the store then holds a finished record of each run it counts
    (a run closes its record before its parent hears it ended)."""

    async def probe() -> AgentStatus | None:
        st = await status(handle)
        taken_in = st.last_run.run if st.last_run is not None else 0
        return st if st.current_run is None and taken_in == st.run_count else None

    found = await eventually(probe, what="the agent between runs")
    assert found is not None
    return found


def finished_runs(store: Store, agent_id: str) -> list[RunRecord]:
    """Runs that reached the store's end state, oldest first."""
    runs = store.run_reads.list_runs(agent_id, limit=10_000)
    return sorted((r for r in runs if r.status != "running"), key=lambda r: r.run)


async def wait_runs(
    store: Store, agent_id: str, count: int, *, timeout: float = 30.0
) -> list[RunRecord]:
    async def probe() -> list[RunRecord]:
        runs = finished_runs(store, agent_id)
        return runs if len(runs) >= count else []

    return await eventually(probe, timeout=timeout, what=f"{count} finished runs of {agent_id}")


def run_that_destroyed(store: Store, agent_id: str, instance_id: int) -> RunRecord | None:
    """The finished run whose actions destroyed `instance_id`, if one has
    been recorded. A replacement shows at vast.ai (the simulator) before the
    run that made it has ended and recorded itself: a test that reads that
    run's record waits for it, not for the machines."""
    done = f"destroy_instance: Destroyed instance {instance_id} "
    return next((r for r in finished_runs(store, agent_id) if done in r.actions_digest), None)


def assert_sequential(runs: Sequence[RunRecord]) -> None:
    """No two runs overlapped in (workflow) time."""
    ordered = sorted(runs, key=lambda r: r.run)
    for before, after in itertools.pairwise(ordered):
        assert before.ended_at is not None
        assert before.ended_at <= after.started_at, (before.run, after.run)


def runs_that_waited(runs: Sequence[RunRecord], window: timedelta) -> list[int]:
    """Runs holding a trigger whose debounce `window` closed while the run
    before was still in flight: had the loop not waited for that run, they
    would have overlapped it. A test of "no overlap" needs some, or it cannot
    fail."""
    ordered = sorted(runs, key=lambda r: r.run)
    return [
        after.run
        for before, after in itertools.pairwise(ordered)
        if before.ended_at is not None
        and any(t.received_at + window < before.ended_at for t in after.triggers)
    ]


def tool_request(
    agent_id: str,
    name: str,
    args: dict[str, Any],
    config: AgentConfig | None = None,
    *,
    tool_id: str = "",
) -> FleetToolRequest:
    """A fleet tool call of run 1 as the run workflow sends it (a fresh
    tool_use_id unless given)."""
    return FleetToolRequest(
        agent_id=agent_id,
        run=1,
        round=1,
        tool_use_id=tool_id or f"toolu_{uuid.uuid4().hex[:12]}",
        name=name,
        input=args,
        config=config or AgentConfig(),
    )


def finish_ok(store: Store, agent_id: str, run: int, ended_at: datetime, **fields: Any) -> None:
    """Close a run's record as a plain successful run; `fields` override any
    of `RunWrites.finish_run`'s keywords (usage, final_text, cost_usd, ...)."""
    defaults: dict[str, Any] = {
        "status": RunStatus.OK,
        "verdict": None,
        "verdict_error": "",
        "noop": False,
        "in_prompt": True,
        "error": "",
        "final_text": "",
        "actions_digest": "",
        "mutating_calls": 0,
        "tool_calls": 0,
        "rounds": 1,
        "usage": TokenUsage(),
        "llm_seconds": 0.0,
    }
    store.run_writes.finish_run(agent_id, run, ended_at=ended_at, **(defaults | fields))


def as_background_job() -> None:
    """A child's `preexec_fn`: what a shell does to a job it starts with `&`,
    SIGINT ignored (Python then installs no KeyboardInterrupt handler)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_process_env(dev_env: WorkflowEnvironment, db_url: str, **extra: str) -> dict[str, str]:
    """The environment of a `python worker.py` (or `fleet-agent worker`)
    child: this one without our own variables, pointed at `dev_env` and the
    store at `db_url`, the autopilot deciding and the simulator's provers
    read on loopback unless `extra` says otherwise."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "VAST_", "FLEET_", "TEMPORAL_"))
    }
    return env | {
        "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
        "FLEET_DATABASE_URL": db_url,
        "FLEET_LLM_PROVIDER": "autopilot",
        # The simulator's provers listen on loopback.
        "FLEET_PROVER_ALLOW_LOOPBACK": "1",
        # ...and serve the sidecar's status: the old path's contract.
        "FLEET_PROVER_MODE": "curio_on_host",
        "FLEET_PROVER_MIN_RAM_GIB": "60",  # the simulated prover's (testkit/sim_helpers.py)
        **extra,
    }


def idle_status(agent_id: str = "a1", **fields: Any) -> AgentStatus:
    """An agent's status as the query answers it, idle after a few runs, with
    `fields` over it: for tests of what the CLI and the console show."""
    base: dict[str, Any] = {
        "agent_id": agent_id,
        "session": 1,
        "run_count": 1,
        "phase": Phase.IDLE,
        "current_run": None,
        "pending_triggers": [],
        "next_heartbeat_at": None,
        "next_run_due_at": None,
        "wakes": [],
        "last_run": None,
        "config": AgentConfig(),
        "rejected": [],
        "executions": 1,
        "history_length": 10,
    }
    return AgentStatus(**(base | fields))


async def first_pending(handle: Any, what: str = "an approval to be asked for") -> PendingApproval:
    """The agent's first pending approval, once there is one (60 s at most)."""

    async def probe() -> PendingApproval | None:
        st = await status(handle)
        return st.pending_approvals[0] if st.pending_approvals else None

    found = await eventually(probe, timeout=60, what=what)
    assert found is not None
    return found


async def _continued_from(client: Client, handle: WorkflowHandle[Any, Any]) -> str:
    """The run id the newest execution of `handle`'s chain continued from,
    as the server has it ("" while the chain has one execution)."""
    newest = client.get_workflow_handle(handle.id)
    first = await anext(aiter(newest.fetch_history_events()))
    return first.workflow_execution_started_event_attributes.continued_execution_run_id


async def has_continued(client: Client, handle: WorkflowHandle[Any, Any]) -> bool:
    """Whether the server has `handle`'s chain continued as new. The
    workflow's own count of executions goes up as it decides to continue,
    before the server has closed the old one (and on the time-skipping
    server a clock skip then can stall: sdk-java#1538)."""
    return bool(await _continued_from(client, handle))


async def previous_execution(
    client: Client, handle: WorkflowHandle[Any, Any]
) -> WorkflowHandle[Any, Any]:
    """The execution the newest one of `handle`'s chain continued from
    (`handle` may name any execution of the chain: the newest is asked)."""
    run_id = await _continued_from(client, handle)
    assert run_id, "the chain has not continued as new (wait for has_continued)"
    return client.get_workflow_handle(handle.id, run_id=run_id)


async def replay_agent_chain(client: Client, handle: WorkflowHandle[Any, Any]) -> int:
    """Replay every execution of the agent's continue-as-new chain, newest
    first, with the workflow code as it is now (NondeterminismError on a
    change that breaks them); returns how many."""
    replayer = Replayer(workflows=[FleetAgentWorkflow], data_converter=pydantic_data_converter)
    current: WorkflowHandle[Any, Any] | None = client.get_workflow_handle(handle.id)
    count = 0
    while current is not None:
        history = await current.fetch_history()
        await replayer.replay_workflow(history)
        count += 1
        first = history.events[0].workflow_execution_started_event_attributes
        run_id = first.continued_execution_run_id
        current = client.get_workflow_handle(handle.id, run_id=run_id) if run_id else None
    return count
