"""Run a fleet-agent worker: `python worker.py [--new-store]`.

Settings come from the environment (see README): Temporal connection
(TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, env-config profiles), the store
(FLEET_DATABASE_URL, FLEET_NEW_STORE), the LLM (FLEET_LLM_PROVIDER,
ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, FLEET_LLM_MODEL), vast.ai
(VAST_API_URL, VAST_API_KEY), the demand source (FLEET_DEMAND_SOURCE,
FLEET_DEMAND_URL, FLEET_DEMAND_TOKEN) and the Snark Market (FLEET_MARKET_SOURCE,
FLEET_MARKET_PRICE_URL, FLEET_FIL_USD_URL). Credentials stay in this process: activities
read them here, never from workflow history or the store.

A missing or empty store is created only when no agent is running on the
worker's task queue, or with `--new-store` (see fleet_agent.store.guard).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.exc import OperationalError
from temporalio.client import Client
from temporalio.envconfig import ClientConfig
from temporalio.service import RPCError
from temporalio.worker import PollerBehaviorSimpleMaximum, UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities.compact import CompactActivities
from activities.demand import DemandActivities, source_from_env
from activities.fleet import FleetActivities
from activities.fleet_credentials import machine_env_of
from activities.llm import LlmActivities
from activities.market import MarketActivities
from activities.market_sources import market_from_env
from activities.notify import NotifyActivities
from activities.restart import WatchdogActivities
from activities.runlog import RunLogActivities
from activities.temporal import TemporalActivities
from activities.visibility import VisibilityActivities
from fleet_agent.config.settings import Settings
from fleet_agent.config.tuning import WorkerTuning
from fleet_agent.env.env_file import export_env_file
from fleet_agent.llm.base import LlmProvider
from fleet_agent.llm.model_table import KNOWN_MODELS, ModelInfo
from fleet_agent.llm.tools import FLEET_TOOLS, LOCAL_TOOLS
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import NEW_STORE_FLAG, SchemaError, Store, StoreRefused, store_refusal
from fleet_agent.vast.client import VastClient
from fleet_agent.visibility.search_attributes import SearchAttributeMode
from runtime.bytecode import bytecode_warning
from runtime.connect import connect, is_connect_failure, target_address, unreachable
from runtime.llm_provider import provider_from_settings
from runtime.process_exit import end_process
from runtime.stopping import stop_event
from runtime.telemetry import MetricsUnavailable, install_metrics
from workflows import (
    AgentRunWorkflow,
    AgentWatchdogWorkflow,
    FleetAgentWorkflow,
    FleetMonitorWorkflow,
)
from workflows.policies import TASK_QUEUE

__all__ = [
    "build_worker",
    "main",
    "open_worker_store",
    "running_agents",
    "sources_from_settings",
    "worker_activities",
]

log = logging.getLogger("fleet_agent.worker")
#: The workflow modules, which the sandbox imports afresh for every workflow.
WORKFLOWS_DIR = Path(inspect.getfile(FleetAgentWorkflow)).parent

HEARTBEAT_SEND_INTERVAL = timedelta(seconds=5)
# The agents a worker serves: running agent workflows on its task queue.
RUNNING_AGENTS_QUERY = 'WorkflowType="FleetAgentWorkflow" AND ExecutionStatus="Running"'
_MAX_LISTED_AGENTS = 1000


def worker_activities(
    store: Store,
    provider: LlmProvider,
    fleet: FleetActivities | None = None,
    prices: Mapping[str, ModelInfo] = KNOWN_MODELS,
    search_attributes: SearchAttributeMode = "auto",
    notify: NotifyEnv | None = None,
    demand: DemandActivities | None = None,
    market: MarketActivities | None = None,
) -> list[Callable[..., Any]]:
    """Every activity a worker registers; the workflows call them through the
    declarations in workflows/stubs.py (tests/layers/test_layers.py checks they match).

    Without `fleet` the agent loop runs with its workflow-local tools only
    (and its monitor, if enabled, finds no poll activity: disable it).
    `prices` (FLEET_LLM_PRICES applied) prices each run's LLM rounds;
    `search_attributes` (FLEET_SEARCH_ATTRIBUTES) says whether the workflows
    may upsert search attributes (activities/visibility.py). `notify`: where
    notifications go (default: FLEET_NOTIFY_URLS from the environment or .env).
    `demand`: the demand source's reader (default: none configured);
    `market`: the Snark Market's client and levers (default: none configured).
    """
    runlog = RunLogActivities(store, fleet, prices)
    links = TemporalActivities(store)
    tools = LOCAL_TOOLS | FLEET_TOOLS if fleet is not None else LOCAL_TOOLS
    llm = LlmActivities(store, provider, tools)
    compact = CompactActivities(store, provider)
    watchdog = WatchdogActivities(store)
    fleet_activities: list[Callable[..., Any]] = []
    if fleet is not None:
        fleet_activities = [
            fleet.get_fleet_status,
            fleet.search_offers,
            fleet.create_instance,
            fleet.destroy_instance,
            fleet.poll_fleet,
            fleet.reconcile_labels,
            fleet.stop_fleet,
        ]
    return [
        runlog.load_agent_counters,
        runlog.load_context,
        runlog.store_tool_results,
        runlog.record_run,
        llm.call_llm,
        compact.compact_session,
        links.store_operator_messages,
        links.wait_for_run,
        links.agent_is_open,
        VisibilityActivities(search_attributes).search_attributes_ready,
        watchdog.ensure_agent,
        watchdog.save_agent_config,
        watchdog.recall_agent,
        NotifyActivities(
            store, notify if notify is not None else NotifyEnv.load()
        ).send_notification,
        *_demand_activities((demand or DemandActivities()).with_store(store)),
        *_market_activities((market or MarketActivities()).with_store(store)),
        *fleet_activities,
    ]


def _demand_activities(demand: DemandActivities) -> list[Callable[..., Any]]:
    return [demand.read_demand, demand.observe_demand]


def _market_activities(market: MarketActivities) -> list[Callable[..., Any]]:
    return [
        market.observe_market,
        market.set_ask_price,
        market.set_requests,
        market.change_requests,
    ]


def build_worker(
    client: Client,
    *,
    store: Store,
    provider: LlmProvider,
    fleet: FleetActivities | None = None,
    task_queue: str = TASK_QUEUE,
    prices: Mapping[str, ModelInfo] = KNOWN_MODELS,
    search_attributes: SearchAttributeMode = "auto",
    tuning: WorkerTuning | None = None,
    notify: NotifyEnv | None = None,
    demand: DemandActivities | None = None,
    market: MarketActivities | None = None,
) -> Worker:
    """A worker with every workflow and activity of fleet-agent on `task_queue`,
    its slots, pollers and cache set by `tuning` (default: the FLEET_WORKER_*
    variables over the defaults; the reasons for each figure are in
    fleet_agent/config/tuning.py)."""
    tuning = tuning or WorkerTuning.from_env()
    return Worker(
        client,
        task_queue=task_queue,
        # Set deliberately rather than left to the SDK's defaults, for many
        # agents on one worker (docs/decisions/load-time.md, "Many fleets on one worker").
        max_concurrent_activities=tuning.max_concurrent_activities,
        max_concurrent_workflow_tasks=tuning.max_concurrent_workflow_tasks,
        max_cached_workflows=tuning.max_cached_workflows,
        workflow_task_poller_behavior=PollerBehaviorSimpleMaximum(tuning.workflow_task_pollers),
        activity_task_poller_behavior=PollerBehaviorSimpleMaximum(tuning.activity_task_pollers),
        graceful_shutdown_timeout=timedelta(seconds=tuning.shutdown_grace_s),
        # Heartbeats reach the server at least this often: a worker killed
        # right after an LLM reply arrived loses at most this much of it
        # (the reply rides in the heartbeat details; see activities/llm.py).
        max_heartbeat_throttle_interval=HEARTBEAT_SEND_INTERVAL,
        workflows=[
            FleetAgentWorkflow,
            AgentRunWorkflow,
            FleetMonitorWorkflow,
            AgentWatchdogWorkflow,
        ],
        # The SDK's sandbox unless turned off: it re-imports the workflow
        # modules for every run and crosses into the sandbox for every
        # payload: about a tenth of the worker's CPU at 300 agents
        # (docs/decisions/load-time.md, "The sandbox's price, and a worker without it").
        workflow_runner=SandboxedWorkflowRunner()
        if tuning.workflow_sandbox
        else UnsandboxedWorkflowRunner(),
        activities=worker_activities(
            store, provider, fleet, prices, search_attributes, notify, demand, market
        ),
    )


def sources_from_settings(settings: Settings) -> tuple[DemandActivities, MarketActivities]:
    """The demand source and the Snark Market's client the settings name
    (FLEET_DEMAND_*, FLEET_MARKET_*): what `python worker.py` and the local
    stack's worker both register."""
    return (
        DemandActivities(source_from_env(settings.demand)),
        MarketActivities(market_from_env(settings.market, settings.demand)),
    )


def fleet_from_settings(
    settings: Settings, store: Store, tuning: WorkerTuning | None = None
) -> FleetActivities | None:
    """vast.ai (or the simulator at VAST_API_URL) when a key is configured.

    The fleet tools journal their calls in `store` and read each agent's live
    config from its workflow (the `live_config` query, via the activity's client).
    One client, so one shared instance listing for every agent of the
    worker (`tuning`, default from the environment: FLEET_VAST_LIST_TTL_S,
    5 s, and FLEET_VAST_LIST_STALE_S, 30 s). In router mode each create
    carries a credential made for its machine from the CA at
    FLEET_ROUTER_CA_DIR (activities/fleet_credentials.py).
    """
    if settings.vast_api_key is None:
        return None
    tuning = tuning or WorkerTuning.from_env()
    vast = VastClient(
        settings.vast_api_key.get_secret_value(),
        settings.vast_api_url,
        list_ttl_s=tuning.vast_list_ttl_s,
        list_stale_s=tuning.vast_list_stale_s,
    )
    return FleetActivities(vast, settings.prover, store=store, machine_env=machine_env_of(settings))


async def running_agents(client: Client, task_queue: str = TASK_QUEUE) -> list[str]:
    """IDs of the running agent workflows on `task_queue` (Temporal visibility)."""
    query = f'{RUNNING_AGENTS_QUERY} AND TaskQueue="{task_queue}"'
    return [wf.id async for wf in client.list_workflows(query, limit=_MAX_LISTED_AGENTS)]


async def open_worker_store(
    client: Client, url: str | None, *, new_store: bool, task_queue: str = TASK_QUEUE
) -> Store:
    """The worker's store, created or upgraded (`Store.create_all`) as needed.

    Raises `StoreRefused` when the store cannot be reached, or is missing or
    empty while agents are running on `task_queue` and `new_store` is False,
    and `SchemaError` when the store is newer than this code.
    """
    store = Store(url)
    try:
        try:
            condition = await asyncio.to_thread(store.condition)
        except OperationalError as exc:
            # Unreachable (or unopenable): the worker cannot do anything useful.
            first = str(exc.orig or exc).strip().splitlines()[0]
            raise StoreRefused(f"cannot open the store at {store.where}: {first}") from None
        if condition.empty:
            agents: list[str] = []
            unknown = ""
            try:
                agents = await running_agents(client, task_queue)
            except RPCError as exc:
                unknown = f"listing workflows failed: {exc.message}"
            refusal = store_refusal(
                condition,
                where=store.where,
                namespace=client.namespace,
                agents=agents,
                allow_new=new_store,
                agents_unknown=unknown,
            )
            if refusal is not None:
                raise StoreRefused(refusal)
            if agents:
                log.warning(
                    "creating a new, empty store at %s (%s) although %d agent(s) are running",
                    store.where,
                    NEW_STORE_FLAG,
                    len(agents),
                )
        found = await asyncio.to_thread(store.create_all)
    except BaseException:
        store.dispose()
        raise
    if found is None:
        log.info("created a new store at %s", store.where)
    return store


async def main(*, new_store: bool | None = None, settings: Settings | None = None) -> None:
    """Run the worker until Ctrl-C or SIGTERM, then shut it down (activities
    under way get FLEET_WORKER_SHUTDOWN_GRACE_S); `new_store` None reads
    FLEET_NEW_STORE.

    Without `settings` they are read from the environment here (a bad one,
    e.g. an unknown FLEET_LLM_MODEL, raises `ValueError` before anything starts).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    settings = settings or Settings.from_env()
    tuning = WorkerTuning.from_env()
    if tuning.workflow_sandbox:
        # Only the sandbox imports the workflow modules again for each run.
        warning = bytecode_warning(WORKFLOWS_DIR, writing_off=sys.dont_write_bytecode)
        if warning is not None:
            log.warning("%s", warning)
    else:
        log.warning(
            "FLEET_WORKFLOW_SANDBOX=off: workflow code runs outside the SDK's sandbox, "
            "so a clock, random number or I/O call in it is not caught at run time"
        )
    # First: a signal while the worker connects or opens its store stops it too.
    stop = stop_event()
    built: list[Worker] = []
    serving = asyncio.create_task(_serve(settings, tuning, new_store, built))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if not serving.done():
        if built:
            # Polling ends at once; what runs gets the grace, then is
            # cancelled and retried on another worker.
            log.info("stopping: activities under way get %.0f s", tuning.shutdown_grace_s)
            await built[0].shutdown()
        else:
            serving.cancel()
    try:
        await serving
    except asyncio.CancelledError:
        if not serving.cancelled():  # main() itself is cancelled: not ours to swallow
            raise
    log.info("worker stopped")


async def _serve(
    settings: Settings, tuning: WorkerTuning, new_store: bool | None, built: list[Worker]
) -> None:
    """Connect, open the store, and run the worker (appended to `built` once
    it exists) until it is shut down."""
    if settings.metrics_address is not None:
        # Before the client connects: the client's runtime carries the telemetry.
        log.info("Prometheus metrics on %s", install_metrics(settings.metrics_address))
    provider = provider_from_settings(settings)
    client = await connect()
    store = await open_worker_store(
        client,
        settings.database_url,
        new_store=settings.new_store if new_store is None else new_store,
    )
    try:
        fleet = fleet_from_settings(settings, store, tuning)
        demand, market = sources_from_settings(settings)
        log.info(
            "worker on task queue %s (LLM: %s, store: %s, vast.ai: %s)",
            TASK_QUEUE,
            f"{provider.name} {settings.llm_model}"
            if settings.llm_provider == "anthropic"
            else provider.name,
            store,
            settings.vast_api_url if fleet else "not configured (set VAST_API_KEY)",
        )
        worker = build_worker(
            client,
            store=store,
            provider=provider,
            fleet=fleet,
            prices=settings.llm_models,
            search_attributes=settings.search_attributes,
            tuning=tuning,
            demand=demand,
            market=market,
        )
        built.append(worker)
        await worker.run()
    finally:
        store.dispose()


def _cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="worker.py", description="Run a fleet-agent worker.")
    parser.add_argument(
        NEW_STORE_FLAG,
        action="store_true",
        default=None,
        help="create a new, empty store even if agents are running (env FLEET_NEW_STORE=1)",
    )
    args = parser.parse_args(argv)
    try:
        # The .env file's variables join the environment first (it wins), so
        # the SDK's TEMPORAL_* see them as the settings do.
        export_env_file()
        # Read first: a bad setting (an unknown FLEET_LLM_MODEL, say) stops
        # the worker with one line before it connects to anything.
        settings = Settings.from_env()
        WorkerTuning.from_env()
        asyncio.run(main(new_store=args.new_store, settings=settings))
    except (StoreRefused, SchemaError, ValueError, MetricsUnavailable) as exc:
        print(f"worker: error: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        if not is_connect_failure(exc):
            raise
        # One line, as `fleet-agent worker` says it: a wrong TEMPORAL_ADDRESS
        # or a server not up yet is an operator's matter, not a traceback.
        where = target_address(ClientConfig.load_client_connect_config())
        print(f"worker: error: {unreachable(where, exc)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # Not through the interpreter's finalization, which the SDK's threads can
    # abort (a refusal's exit 1 became -6): runtime/process_exit.py.
    end_process(_cli())
