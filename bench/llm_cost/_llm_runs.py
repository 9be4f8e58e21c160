"""The agent on the time-skipping server with the fake Messages API: shared by
bench/llm_cost/prompt_cache.py and bench/llm_cost/context_growth.py.

A real worker (the simulator behind the fleet tools, a SQLite store in a
temporary directory) and the real `AnthropicProvider` talking to the fake
Messages API, whose prompt cache runs on the Temporal server's clock.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.config.settings import ProverSpec
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.base import LlmOptions, LlmReply, ProgressCallback, SystemPrompt
from fleet_agent.models import AgentInput, ConfigPatch, Effort
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes import FAKE_API_KEY, FakeAnthropic, Responder
from testkit.servers import start_time_skipping_env
from testkit.sim_helpers import SIM_RAM_GIB
from worker import build_worker
from workflows import FleetAgentWorkflow

__all__ = ["HEARTBEAT_S", "AgentStack", "ClockedProvider", "ServerClock", "agent_stack"]

HEARTBEAT_S = 300


class ServerClock:
    """The time of the Temporal server, as the LLM activity last saw it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class ClockedProvider:
    """The real provider; before each call it sets the fake API's clock to the
    activity's (skipped) scheduled time, so cache TTLs run on simulated time."""

    name = "anthropic"

    def __init__(self, inner: AnthropicProvider, clock: ServerClock) -> None:
        self._inner = inner
        self._clock = clock
        # What the activities read of a provider: its model and what it takes.
        self.model = inner.model
        self.info = inner.info

    async def complete(
        self,
        *,
        system: SystemPrompt,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int,
        on_progress: ProgressCallback | None = None,
        options: LlmOptions | None = None,
    ) -> LlmReply:
        self._clock.now = activity.info().current_attempt_scheduled_time.timestamp()
        return await self._inner.complete(
            system=system,
            messages=messages,
            tools=tools,
            max_tokens=max_tokens,
            on_progress=on_progress,
            options=options,
        )


@dataclass
class AgentStack:
    env: WorkflowEnvironment
    handle: WorkflowHandle[Any, Any]
    store: Store
    fake: FakeAnthropic


@asynccontextmanager
async def agent_stack(
    *, seed: int, budget: int, respond: Responder, prefix: str, effort: Effort | None = None
) -> AsyncIterator[AgentStack]:
    """One agent (monitor off, 5-minute heartbeat, `budget` history tokens,
    `llm_effort` = `effort` or the config's default) started on a fresh stack;
    terminated when the block ends. The fake Messages API behaves like the
    default model: it thinks, and bills thinking tokens by effort."""
    clock = ServerClock()
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeAnthropic(clock=clock) as fake,
        SimServer(seed=seed, speed=0, scenario="ideal", offers=500, rate_limits=False) as sim,
    ):
        fake.set_responder(respond)
        store = Store(f"sqlite:///{Path(tmp) / 'fleet.db'}")
        store.create_all()
        env = await start_time_skipping_env()
        try:
            async with VastClient(
                sim.api_key, sim.url, timeout=5, backoff_base=0.01, pacing=NO_PACING
            ) as vast:
                fleet = FleetActivities(
                    vast,
                    ProverSpec(
                        mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB
                    ),
                    store=store,
                    clock=sim.market.now,
                )
                provider = ClockedProvider(
                    AnthropicProvider(api_key=FAKE_API_KEY, base_url=fake.base_url), clock
                )
                queue = f"{prefix}-{uuid.uuid4().hex[:8]}"
                worker = build_worker(
                    env.client, store=store, provider=provider, fleet=fleet, task_queue=queue
                )
                async with worker:
                    config = ConfigPatch(
                        monitor_enabled=False,
                        heartbeat_seconds=HEARTBEAT_S,
                        history_token_budget=budget,
                        llm_effort=effort,
                    )
                    handle = await env.client.start_workflow(
                        FleetAgentWorkflow.run,
                        AgentInput(config=config),
                        id=f"{prefix}-{uuid.uuid4().hex[:8]}",
                        task_queue=queue,
                    )
                    try:
                        yield AgentStack(env=env, handle=handle, store=store, fake=fake)
                    finally:
                        await handle.terminate("benchmark finished")
        finally:
            await env.shutdown()
            store.dispose()
