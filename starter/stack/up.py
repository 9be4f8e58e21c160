"""`fleet-agent up`: the whole local stack in one process tree (what `make run` runs).

Temporal dev server (a subprocess, or one already listening on the configured
port) → vast.ai simulator (in-process, when no VAST_API_KEY is set) → worker
(in-process) → the agent workflow. In router mode (FLEET_PROVER_MODE unset or
`router`) on the simulator, also the cuzk router and a Curio stand-in sending
it proofs (in-process tasks: starter/stack/router.py). With `--sim-demand`
and no FLEET_PROVER_MODE, the simulator runs the Snark Market instead, its
node proving on the fleet (starter/stack/market.py). Everything is torn down
in reverse order on Ctrl-C/SIGTERM, or after the first run with `--check` (a
smoke test).

One stack per port: a second `up` of a running stack attaches to it and starts
nothing (starter/stack/attach.py), or adds just a worker with `--add-worker`.
Each stack keeps its own files, its store among them (fleet_agent/env/local_stack.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import shlex
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from fleet_agent.config.settings import Settings
from fleet_agent.config.tuning import WorkerTuning
from fleet_agent.env.local_stack import (
    DEFAULT_TEMPORAL_PORT,
    TEMPORAL_PORT_ENV,
    StackPaths,
    stack_paths,
)
from fleet_agent.models import ConfigPatch
from fleet_agent.store import SchemaError, StoreRefused, redacted_url
from fleet_agent.store.engine import DATABASE_URL_ENV
from runtime.stopping import stop_event
from runtime.telemetry import MetricsUnavailable, install_stack_metrics
from starter.agent_client import AgentClient, CliError
from starter.console import DEFAULT_CONSOLE_PORT, console_for_stack
from starter.stack.attach import attach, check_summary, connect_retrying, first_run
from starter.stack.demand import DemandWiring, demand_env, demand_lines, suggested_max_target
from starter.stack.devserver import DevServerConfig
from starter.stack.guard import OwnedStack, StackRecord, claim_stack, new_record
from starter.stack.market import market_env, market_line, market_stack_config
from starter.stack.options import StackOptions, dev_config
from starter.stack.router import curio_demand, router_listen, stack_curio, stack_router
from starter.stack.sim import routed, shared_simulator, simulator
from starter.stack.temporal_server import SERVER_START_TIMEOUT, Server, temporal_server
from starter.watchdog_schedule import setup_watchdog, watchdog_interval

if TYPE_CHECKING:
    from simulator import DemandConfig

__all__ = ["StackOptions", "up"]

log = logging.getLogger("fleet_agent.stack")


def _banner(
    opts: StackOptions,
    server: Server,
    namespace: str,
    sim_url: str | None,
    settings: Settings,
    db_url: str,
    provider: str,
    wiring: DemandWiring | None,
    router: str | None = None,
) -> str:
    env = _cli_env(server.address, db_url, from_settings=settings.database_url is not None)
    agent = "" if opts.agent_id == "fleet-agent" else f" --agent-id {opts.agent_id}"
    if sim_url:
        vast = f"simulator at {sim_url} (VAST_API_URL exported)"
    elif settings.vast_api_key is not None:
        vast = f"{settings.vast_api_url} (key from VAST_API_KEY)"
    else:
        vast = "not configured: fleet tools and monitor off"
    started = "started here" if server.started else "already running, reused"
    lines = [
        f"fleet-agent is up: agent {opts.agent_id!r} on task queue {opts.task_queue!r}",
        f"  Temporal:   {server.address} namespace {namespace} ({started})",
        f"  Web UI:     {server.ui_url}/namespaces/{namespace}/workflows/{opts.agent_id}",
    ]
    if server.log_path is not None:
        lines.append(f"  server log: {server.log_path}")
    lines += [
        f"  vast.ai:    {vast}",
        f"  run log:    {redacted_url(db_url)}",
        f"  LLM:        {provider}",
    ]
    if router is not None:
        lines.append(
            f"  router:     router at {router} — Curio's [Cuzk] Address "
            f"(a Curio stand-in sends it proofs; its summary every minute below)"
        )
    curve = curio_demand(opts.sim_demand) if router is not None else opts.sim_demand
    demand, switch = demand_lines(wiring, settings.demand, curve)
    market = wiring is not None and wiring.source == "curio"
    if router is not None or market:
        switch = None  # a fresh agent on the router's queue or the market starts in demand mode
    if demand is not None:
        lines.append(demand)
    if market and wiring is not None:
        lines.append(market_line(wiring))
    lines += [
        "try:",
        f'  {env}.venv/bin/fleet-agent ask{agent} "how is the fleet?"',
        f"  {env}.venv/bin/fleet-agent fleet{agent}",
        f"  {env}.venv/bin/fleet-agent status{agent}",
        f"  {env}.venv/bin/fleet-agent runs{agent}",
        *([f"  {env}.venv/bin/fleet-agent config{agent} {switch}"] if switch else []),
        f"  .venv/bin/temporal workflow query --address {server.address} "
        f"--workflow-id {opts.agent_id} --type status",
    ]
    if not opts.check:
        lines.append("Ctrl-C stops everything.")
    return "\n".join(lines)


def _router_stack_config(curio: DemandConfig, wiring: DemandWiring | None) -> ConfigPatch:
    """A fresh agent's config on the router stack: demand mode up to
    `suggested_max_target` when the worker reads the router's queue, else a
    fixed target at the Curio stand-in's peak."""
    if wiring is not None and wiring.exported:
        return ConfigPatch(target_mode="demand", max_target=suggested_max_target(curio))
    return ConfigPatch(target_proofs_per_hour=max(rate for _, rate in curio.curve))


async def up(opts: StackOptions) -> int:
    """Run the local stack until stopped (or, with `check`, until the first run ends).

    When this checkout's stack already runs on the port, attach to it instead
    (starting nothing), or with `add_worker` add one worker to it.
    """
    config, paths = dev_config(opts)
    try:
        # Read once up front so a bad FLEET_LLM_PROVIDER (or an unknown
        # FLEET_LLM_MODEL, or a bad FLEET_WORKER_*) fails before anything starts.
        Settings.from_env()
        WorkerTuning.from_env()
    except ValueError as exc:
        raise CliError(str(exc)) from None
    stop = stop_event()
    claim = claim_stack(paths.stack_file)
    if not isinstance(claim, OwnedStack):
        if not opts.add_worker:
            return await attach(
                claim,
                address=claim.temporal_address if claim else f"{config.address}:{config.port}",
                namespace=config.namespace,
                agent_id=opts.agent_id,
                task_queue=(claim.task_queue if claim else "") or opts.task_queue,
                stack_file=paths.stack_file,
                stop=stop,
                check_timeout=opts.check_timeout if opts.check else None,
                connect_within=SERVER_START_TIMEOUT,
            )
        if claim is None or not claim.ready:  # its simulator's URL is not known yet
            raise CliError(
                f"the stack on port {config.port} is still starting: add the worker once it is up"
            )
        return await _serve(opts, config, paths, stop, owner=claim, owned=None)
    try:
        if opts.add_worker:
            raise CliError(
                f"--add-worker adds a worker to a running stack, and none of this checkout "
                f"runs on port {config.port}: run without it"
            )
        claim.write(_record(opts, config))
        return await _serve(opts, config, paths, stop, owner=None, owned=claim)
    finally:
        claim.release()


def _record(opts: StackOptions, config: DevServerConfig, **more: Any) -> StackRecord:
    return new_record(
        f"{config.address}:{config.port}",
        config.namespace,
        ui_url=f"http://{config.address}:{config.ui_port}",
        console_port=opts.console_port,
        agent_id=opts.agent_id,
        task_queue=opts.task_queue,
        **more,
    )


async def _serve(
    opts: StackOptions,
    config: DevServerConfig,
    paths: StackPaths,
    stop: asyncio.Event,
    *,
    owner: StackRecord | None,
    owned: OwnedStack | None,
) -> int:
    """The stack (`owned`: this process runs it) or one worker added to `owner`'s."""
    try:
        # Only a process that runs a worker serves metrics (one that attaches
        # does not), and before its first client: that client's runtime
        # carries them.
        _, metrics_line = install_stack_metrics(os.environ)
    except MetricsUnavailable as exc:
        raise CliError(str(exc)) from None
    # The worker and the LLM SDK take seconds of CPU to import (more on a fresh
    # clone, which compiles them): a thread loads them while the dev server
    # boots on another core. A second `up` that only attaches never needs them.
    loading = asyncio.create_task(asyncio.to_thread(_import_worker))
    async with contextlib.AsyncExitStack() as stack:
        if owner is None:
            server = await stack.enter_async_context(temporal_server(config))
        else:
            server = Server(owner.temporal_address, owner.ui_url, started=False, log_path=None)
        await loading
        from runtime.llm_provider import provider_from_settings
        from worker import (
            build_worker,
            fleet_from_settings,
            open_worker_store,
            sources_from_settings,
        )

        client = await connect_retrying(server.address, config.namespace, SERVER_START_TIMEOUT)
        if owner is None:
            state = None if opts.sim_no_state else opts.sim_state or str(paths.sim_state)
            sim = stack.enter_context(simulator(opts, state, paths.router_ca))
            sim_url = sim.url if sim is not None else None
            curio_url = sim.curio_url if sim is not None else None
            # The Snark Market replaces the simulator's /demand queue.
            with_demand = sim_url and opts.sim_demand and curio_url is None
            demand_url = f"{sim_url}/demand" if with_demand else None
        else:
            market = owner.curio_url is not None
            sim_url = stack.enter_context(
                shared_simulator(owner.sim_url, paths.router_ca, market=market)
            )
            curio_url = owner.curio_url if sim_url else None
            demand_url = owner.demand_url if sim_url else None
        # Router mode on the simulator: the worker reads the router's queue;
        # else the Snark Market's node, or the simulator's demand (unless the
        # operator named a source).
        with_router = sim_url is not None and routed()
        wiring: DemandWiring | None = None
        if with_router:
            wiring = stack.enter_context(demand_env(None))
        elif curio_url is not None:
            wiring = stack.enter_context(market_env(curio_url))
        elif demand_url:
            wiring = stack.enter_context(demand_env(demand_url))
        try:  # again: VAST_API_*, FLEET_DEMAND_* were exported
            settings = Settings.from_env()
        except ValueError as exc:
            raise CliError(str(exc)) from None
        db_url = settings.database_url or _stack_store(paths)
        if owner is not None and owner.store and owner.store != redacted_url(db_url):
            raise CliError(
                f"the running stack's store is {owner.store}, this worker's would be "
                f"{redacted_url(db_url)}: set FLEET_DATABASE_URL as the stack has it"
            )
        try:
            store = await open_worker_store(
                client,
                db_url,
                new_store=opts.new_store or settings.new_store,
                task_queue=opts.task_queue,
            )
        # ValueError: e.g. an unsupported FLEET_DATABASE_URL.
        except (StoreRefused, SchemaError, ValueError) as exc:
            raise CliError(str(exc)) from None
        stack.callback(store.dispose)
        router_at = None
        if with_router and owner is None:
            # The stack's router, before the worker: the CA is made once, here.
            router_at = await stack.enter_async_context(
                stack_router(
                    # The default stack's files are in var/ itself, others' below it.
                    router_listen(default_stack=paths.folder == paths.stack_file.parent),
                    db_url,
                    opts.agent_id,
                    settings.router_ca_dir,
                    opts.sim_speed,
                )
            )
        provider = provider_from_settings(settings)
        model = getattr(provider, "model", None)
        # The same fleet wiring as `python worker.py`: vast.ai, or the simulator above.
        fleet = fleet_from_settings(settings, store)
        demand_source, market_source = sources_from_settings(settings)
        worker = build_worker(
            client,
            store=store,
            provider=provider,
            fleet=fleet,
            task_queue=opts.task_queue,
            prices=settings.llm_models,
            demand=demand_source,
            market=market_source,
        )
        worker_task = asyncio.create_task(worker.run())
        stack.push_async_callback(_stop_worker, worker_task, worker.shutdown)
        agent = AgentClient(client, opts.agent_id, task_queue=opts.task_queue)
        if owned is None:
            assert owner is not None
            print(
                f"worker added to the running stack (pid {owner.pid}): Temporal "
                f"{server.address}, task queue {opts.task_queue!r}, run log "
                f"{redacted_url(db_url)}"
                + (f", demand {d.source} at {d.url}" if (d := settings.demand).url else "")
                + ". Ctrl-C stops this worker only.",
                flush=True,
            )
        else:
            # Without a fleet there is nothing to poll: a fresh agent starts
            # without its monitor. With the stack's router, a fresh agent
            # follows the router's queue (demand mode) when the stack wired
            # it as the demand source: the proofs that wait while the first
            # machine boots are work it must catch up on, and a fixed
            # target at the stand-in's rate never would (one machine of
            # 59/h under 60/h: no proof on time). With the operator's own
            # source, it holds the stand-in's peak.
            fresh: ConfigPatch | None = None
            if not fleet:
                fresh = ConfigPatch(monitor_enabled=False)
            elif router_at is not None:
                fresh = _router_stack_config(curio_demand(opts.sim_demand), wiring)
            elif wiring is not None and wiring.source == "curio" and opts.sim_demand:
                # The market's node waits for machines from the start: a
                # fresh agent follows its queue and reads its business.
                fresh = market_stack_config(opts.sim_demand, wiring)
            started = await agent.start(fresh)
            # `make run` too: the agent comes back if it is ended (starter/watchdog_schedule.py).
            env = _cli_env(server.address, db_url, from_settings=settings.database_url is not None)
            await setup_watchdog(agent, watchdog_interval(), env)
            print(
                _banner(
                    opts,
                    server,
                    config.namespace,
                    sim_url,
                    settings,
                    db_url,
                    f"{provider.name}" + (f" ({model})" if model else ""),
                    wiring,
                    router_at,
                ),
                flush=True,
            )
            print(metrics_line, flush=True)
            console_url = await console_for_stack(
                stack,
                agent,
                ui_url=server.ui_url,
                namespace=config.namespace,
                port=opts.console_port or DEFAULT_CONSOLE_PORT,
                store_url=db_url,
            )
            print(f"console: {console_url}", flush=True)
            owned.write(
                _record(
                    opts,
                    config,
                    sim_url=sim_url,
                    demand_url=demand_url,
                    curio_url=curio_url,
                    store=redacted_url(db_url),
                    ready=True,
                )
            )
            print(f"agent {'started' if started else 'was already running: attached'}", flush=True)
            if router_at is not None:
                await stack.enter_async_context(
                    stack_curio(
                        router_at,
                        curio_demand(opts.sim_demand),
                        speed=opts.sim_speed,
                        seed=opts.sim_seed,
                        out=lambda line: print(line, flush=True),
                    )
                )
        waiters: set[asyncio.Task[Any]] = {worker_task, asyncio.create_task(stop.wait())}
        check = asyncio.create_task(first_run(agent, opts.check_timeout)) if opts.check else None
        if check is not None:
            waiters.add(check)
        done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for task in pending - {worker_task}:
            task.cancel()
        if worker_task in done:
            raise CliError(f"the worker stopped: {worker_task.exception()!r}")
        if check is not None and check in done:
            return check_summary(check.result())
        print("stopping…", flush=True)
    return 0


def _import_worker() -> None:
    importlib.import_module("worker")
    importlib.import_module("runtime.llm_provider")


def _cli_env(address: str, db_url: str, *, from_settings: bool) -> str:
    """The variables that point the CLI at this stack, as the banner prints them.

    TEMPORAL_PORT leads to the stack's server and run log alike (the CLI finds
    its store with `default_database_url`); a stack on a named Temporal
    database keeps its store elsewhere, so that one is named too. A store set
    with FLEET_DATABASE_URL is the operator's own setting, and not repeated
    (it may hold a password).
    """
    port = int(address.rpartition(":")[2])
    env = "" if port == DEFAULT_TEMPORAL_PORT else f"{TEMPORAL_PORT_ENV}={port} "
    if not from_settings and db_url != stack_paths(port).store_url:
        env += f"{DATABASE_URL_ENV}={shlex.quote(db_url)} "
    return env


def _stack_store(paths: StackPaths) -> str:
    """The stack's own SQLite store (its folder created)."""
    paths.store.parent.mkdir(parents=True, exist_ok=True)
    return paths.store_url


async def _stop_worker(task: asyncio.Task[None], shutdown: Callable[[], Awaitable[None]]) -> None:
    if not task.done():
        await shutdown()
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await task
