"""Run a fleet-agent worker: `python worker.py`.

Settings come from the environment (see README): Temporal connection
(TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, env-config profiles), the store
(FLEET_DATABASE_URL), the LLM (FLEET_LLM_PROVIDER, ANTHROPIC_API_KEY,
ANTHROPIC_BASE_URL, FLEET_LLM_MODEL) and vast.ai (VAST_API_URL, VAST_API_KEY).
Credentials stay in this process: activities read them here, never from
workflow history or the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from activities.llm import LlmActivities
from activities.runlog import FleetView, RunLogActivities
from fleet_agent.llm.base import LlmProvider
from fleet_agent.llm.factory import provider_from_settings
from fleet_agent.settings import Settings
from fleet_agent.store import Store
from fleet_agent.tools import LOCAL_TOOLS
from starter.connect import connect
from workflows import AgentRunWorkflow, FleetAgentWorkflow
from workflows.policies import TASK_QUEUE

__all__ = ["build_worker", "main"]

log = logging.getLogger("fleet_agent.worker")


def build_worker(
    client: Client,
    *,
    store: Store,
    provider: LlmProvider,
    fleet: FleetView | None = None,
    fleet_activities: Sequence[Any] = (),
    task_queue: str = TASK_QUEUE,
    tools: frozenset[str] = LOCAL_TOOLS,
) -> Worker:
    """A worker with every workflow and activity of fleet-agent on `task_queue`."""
    runlog = RunLogActivities(store, fleet)
    llm = LlmActivities(store, provider, tools)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[FleetAgentWorkflow, AgentRunWorkflow],
        activities=[
            runlog.load_agent_counters,
            runlog.load_context,
            runlog.store_tool_results,
            runlog.record_run,
            llm.call_llm,
            *fleet_activities,
        ],
        activity_executor=ThreadPoolExecutor(max_workers=16),
    )


async def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = Settings.from_env()
    store = Store(settings.database_url)
    store.create_all()
    provider = provider_from_settings(settings)
    client = await connect()
    log.info(
        "worker on task queue %s (LLM: %s, store: %s)",
        TASK_QUEUE,
        provider.name,
        store,
    )
    await build_worker(client, store=store, provider=provider).run()


if __name__ == "__main__":
    asyncio.run(main())
