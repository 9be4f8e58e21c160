"""A fleet-agent worker on a task queue of its own, with agents started on
it, and the agent's status as a test or a benchmark reads it (giving up fast
when the server does not answer)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from activities.demand import DemandActivities
from activities.fleet import FleetActivities
from activities.market import MarketActivities
from fleet_agent.config.tuning import WorkerTuning
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.base import LlmProvider
from fleet_agent.models import AgentInput, AgentStatus, ConfigPatch
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import Store
from worker import build_worker
from workflows import FleetAgentWorkflow

__all__ = ["ASKS_EVERY_CREATE", "Harness", "running_worker", "status", "status_or_none"]

#: An agent's config whose every create waits for an approval (every offer
#: costs more than $0.01/h), with no monitor: for tests of approvals.
ASKS_EVERY_CREATE: dict[str, Any] = {
    "target_proofs_per_hour": 50,
    "monitor_enabled": False,
    "approval_mode": "threshold",
    "approval_above_dph": 0.01,
}


class Harness:
    """A worker on its own task queue, and the agents started on it."""

    def __init__(self, client: Client, task_queue: str, *, has_fleet: bool = False) -> None:
        self.client = client
        self.task_queue = task_queue
        self.has_fleet = has_fleet
        self.agent_ids: set[str] = set()

    async def start_agent(
        self, *, agent_id: str | None = None, **config: Any
    ) -> WorkflowHandle[FleetAgentWorkflow, None]:
        """Start (or attach to) an agent; the handle follows continue-as-new."""
        agent_id = agent_id or f"agent-{uuid.uuid4().hex[:8]}"
        if not self.has_fleet:
            # Without fleet activities there is nothing for a monitor to poll.
            config.setdefault("monitor_enabled", False)
        await self.client.start_workflow(
            FleetAgentWorkflow.run,
            AgentInput(config=ConfigPatch(**config) if config else None),
            id=agent_id,
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
        self.agent_ids.add(agent_id)
        # No run ID: signals and queries reach the newest execution of the chain.
        return self.client.get_workflow_handle_for(FleetAgentWorkflow.run, agent_id)

    async def terminate_all(self) -> None:
        # An agent left running without its worker would hold up time skipping
        # for every later test (its timers keep firing tasks nobody polls).
        for agent_id in self.agent_ids:
            with contextlib.suppress(Exception):
                await self.client.get_workflow_handle(agent_id).terminate("test finished")


@asynccontextmanager
async def running_worker(
    client: Client,
    store: Store,
    *,
    provider: LlmProvider | None = None,
    fleet: FleetActivities | None = None,
    sandbox: bool = True,
    notify: NotifyEnv | None = None,
    demand: DemandActivities | None = None,
    market: MarketActivities | None = None,
) -> AsyncIterator[Harness]:
    """A full fleet-agent worker on a fresh task queue; its workflows in the
    SDK's sandbox unless `sandbox` is False (whatever FLEET_WORKFLOW_SANDBOX
    says: the tests are where the sandbox checks our workflow code).
    Notifications go to `notify`'s URLs, by default nowhere (never to a
    FLEET_NOTIFY_URLS of the environment running the tests). `demand`: the
    demand source's reader (default: none); `market`: the Snark Market's
    client and levers (default: none configured)."""
    harness = Harness(
        client, f"fleet-agent-test-{uuid.uuid4().hex[:8]}", has_fleet=fleet is not None
    )
    # Ours to close: an anthropic client left to the garbage collector closes
    # itself on whatever loop runs then, which may be a workflow's (the
    # sandbox refuses it, and logs "Task exception was never retrieved").
    own: AnthropicProvider | None = None
    if provider is None:
        provider = own = AnthropicProvider()
    worker = build_worker(
        client,
        store=store,
        provider=provider,
        fleet=fleet,
        task_queue=harness.task_queue,
        # A test's worker stops at once: what still runs then belongs to
        # workflows the test has ended.
        tuning=replace(WorkerTuning.from_env(), shutdown_grace_s=0.0, workflow_sandbox=sandbox),
        notify=notify or NotifyEnv.model_validate({}),
        demand=demand,
        market=market,
    )
    try:
        async with worker:
            try:
                yield harness
            finally:
                await harness.terminate_all()
    finally:
        if own is not None:
            await own.aclose()


async def status(handle: WorkflowHandle[FleetAgentWorkflow, None]) -> AgentStatus:
    """Query the agent, giving up fast if the server does not answer (the
    time-skipping test server can hang a query racing a continue-as-new)."""
    for _ in range(5):
        try:
            return await handle.query(FleetAgentWorkflow.status, rpc_timeout=timedelta(seconds=3))
        except RPCError as exc:
            if exc.status not in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
                raise
    raise AssertionError("the status query kept timing out")


async def status_or_none(handle: WorkflowHandle[FleetAgentWorkflow, None]) -> AgentStatus | None:
    """Status, or None while nobody answers queries: a worker started as a
    separate process (or restarted) answers only once it polls, and on a
    loaded machine its start-up outlasts `status`'s 15 s. For use inside
    `eventually`, whose deadline then bounds the wait."""
    try:
        return await status(handle)
    except AssertionError:
        return None
