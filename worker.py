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
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from activities.fleet import FleetActivities
from activities.links import LinkActivities
from activities.llm import LlmActivities
from activities.runlog import RunLogActivities
from fleet_agent.llm.base import LlmProvider
from fleet_agent.llm.factory import provider_from_settings
from fleet_agent.settings import Settings
from fleet_agent.store import Store
from fleet_agent.tools import FLEET_TOOLS, LOCAL_TOOLS
from fleet_agent.vast.client import VastClient
from starter.connect import connect
from workflows import AgentRunWorkflow, FleetAgentWorkflow, FleetMonitorWorkflow
from workflows.policies import TASK_QUEUE

__all__ = ["build_worker", "main"]

log = logging.getLogger("fleet_agent.worker")

HEARTBEAT_SEND_INTERVAL = timedelta(seconds=5)


def build_worker(
    client: Client,
    *,
    store: Store,
    provider: LlmProvider,
    fleet: FleetActivities | None = None,
    task_queue: str = TASK_QUEUE,
) -> Worker:
    """A worker with every workflow and activity of fleet-agent on `task_queue`.

    Without `fleet` the agent loop runs with its workflow-local tools only
    (and its monitor, if enabled, finds no poll activity: disable it).
    """
    runlog = RunLogActivities(store, fleet)
    links = LinkActivities(store)
    tools = LOCAL_TOOLS | FLEET_TOOLS if fleet is not None else LOCAL_TOOLS
    llm = LlmActivities(store, provider, tools)
    fleet_activities: list[Callable[..., Any]] = []
    if fleet is not None:
        fleet_activities = [
            fleet.get_fleet_status,
            fleet.search_offers,
            fleet.create_instance,
            fleet.destroy_instance,
            fleet.poll_fleet,
            fleet.reconcile_labels,
        ]
    return Worker(
        client,
        task_queue=task_queue,
        # Heartbeats reach the server at least this often: a worker killed
        # right after an LLM reply arrived loses at most this much of it
        # (the reply rides in the heartbeat details; see activities/llm.py).
        max_heartbeat_throttle_interval=HEARTBEAT_SEND_INTERVAL,
        workflows=[FleetAgentWorkflow, AgentRunWorkflow, FleetMonitorWorkflow],
        activities=[
            runlog.load_agent_counters,
            runlog.load_context,
            runlog.store_tool_results,
            runlog.record_run,
            llm.call_llm,
            links.store_operator_messages,
            links.wait_for_run,
            links.agent_is_open,
            *fleet_activities,
        ],
    )


def fleet_from_settings(settings: Settings, store: Store) -> FleetActivities | None:
    """vast.ai (or the simulator at VAST_API_URL) when a key is configured.

    The fleet tools journal their calls in `store` and read each agent's live
    config from its workflow (the `live_config` query, via the activity's client).
    """
    if settings.vast_api_key is None:
        return None
    vast = VastClient(settings.vast_api_key.get_secret_value(), settings.vast_api_url)
    return FleetActivities(vast, settings.prover, store=store)


async def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = Settings.from_env()
    store = Store(settings.database_url)
    store.create_all()
    provider = provider_from_settings(settings)
    fleet = fleet_from_settings(settings, store)
    client = await connect()
    log.info(
        "worker on task queue %s (LLM: %s, store: %s, vast.ai: %s)",
        TASK_QUEUE,
        provider.name,
        store,
        settings.vast_api_url if fleet else "not configured (set VAST_API_KEY)",
    )
    await build_worker(client, store=store, provider=provider, fleet=fleet).run()


if __name__ == "__main__":
    asyncio.run(main())
