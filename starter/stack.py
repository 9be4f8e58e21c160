"""`fleet-agent up`: the whole local stack in one process tree (what `make run` runs).

Temporal dev server (a subprocess, or one already listening on the configured
port) → vast.ai simulator (in-process, when no VAST_API_KEY is set) → worker
(in-process) → the agent workflow. Everything is torn down in reverse order on
Ctrl-C/SIGTERM, or after the first run with `--check` (a smoke test).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from asyncio.subprocess import Process
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from fleet_agent.llm.factory import provider_from_settings
from fleet_agent.models import AgentStatus, ConfigPatch, RunStatus
from fleet_agent.settings import Settings
from fleet_agent.store import SchemaError, StoreRefused, default_database_url, redacted_url
from starter.agent_client import AgentClient, CliError, open_client
from starter.devserver import ROOT, DevServerConfig, find_temporal_cli, load_dev_config
from starter.render import last_run_text
from starter.telemetry import MetricsUnavailable, install_stack_metrics
from worker import build_worker, fleet_from_settings, open_worker_store

__all__ = ["StackOptions", "up"]

log = logging.getLogger("fleet_agent.stack")

SERVER_START_TIMEOUT = 30.0  # a cold dev server with a SQLite file needs a few seconds
SERVER_STOP_TIMEOUT = 10.0
CHECK_POLL_INTERVAL = 0.5


@dataclass(frozen=True)
class StackOptions:
    agent_id: str
    task_queue: str
    port: int | None = None
    ui_port: int | None = None
    db_filename: str | None = None
    check: bool = False
    check_timeout: float = 60.0
    sim_seed: int = 0
    sim_speed: float = 1.0
    sim_scenario: str = "realistic"
    #: The simulator's state file (relative to the working directory), so a
    #: restart finds the fleet it left; None keeps nothing.
    sim_state: str | None = "var/sim-state.json"
    sim_rate_limits: bool = True
    new_store: bool = False


@dataclass(frozen=True)
class _Server:
    address: str
    ui_url: str
    started: bool
    log_path: Path | None


def _dev_config(opts: StackOptions) -> DevServerConfig:
    config = load_dev_config()
    overrides: dict[str, Any] = {}
    if opts.port is not None:
        overrides["port"] = opts.port
    if opts.ui_port is not None:
        overrides["ui_port"] = opts.ui_port
    if opts.db_filename is not None:
        overrides["db_filename"] = opts.db_filename
    return config.model_copy(update=overrides)


async def _listening(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on host:port."""
    try:
        async with asyncio.timeout(0.5):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def _log_tail(path: Path, lines: int = 5) -> str:
    with contextlib.suppress(OSError):
        tail = path.read_text(errors="replace").strip().splitlines()[-lines:]
        return " | ".join(tail)
    return ""


@contextlib.asynccontextmanager
async def _temporal_server(config: DevServerConfig) -> AsyncIterator[_Server]:
    """Reuse a server on the configured port, or run `temporal server start-dev`."""
    address = f"{config.address}:{config.port}"
    ui_url = f"http://{config.address}:{config.ui_port}"
    if await _listening(config.address, config.port):
        yield _Server(address, ui_url, started=False, log_path=None)
        return
    try:
        cli = find_temporal_cli()
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    log_path = (
        (ROOT / config.db_filename).with_suffix(".log")
        if config.db_filename
        else ROOT / "var" / "temporal-dev.log"
    )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log_file:
        # Own session: Ctrl-C reaches only us, so the worker stops before the
        # server it talks to; we terminate the server last.
        proc = await asyncio.create_subprocess_exec(
            cli,
            *config.server_args(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log_file,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        await _wait_listening(proc, config, log_path)
        yield _Server(address, ui_url, started=True, log_path=log_path)
    finally:
        await _stop_process(proc)


async def _wait_listening(proc: Process, config: DevServerConfig, log: Path) -> None:
    """Poll until the server accepts connections; fail fast if it exits."""
    try:
        async with asyncio.timeout(SERVER_START_TIMEOUT):
            while not await _listening(config.address, config.port):
                if proc.returncode is not None:
                    raise CliError(
                        f"the Temporal dev server exited with code {proc.returncode}: "
                        f"{_log_tail(log)} (log: {log})"
                    )
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise CliError(
            f"the Temporal dev server did not listen on {config.address}:{config.port} "
            f"within {SERVER_START_TIMEOUT:g}s (log: {log})"
        ) from None


async def _stop_process(proc: Process) -> None:
    if proc.returncode is not None:
        return
    proc.terminate()
    try:
        async with asyncio.timeout(SERVER_STOP_TIMEOUT):
            await proc.wait()
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def _connect(address: str, namespace: str) -> Client:
    """Connect, retrying while a just-started server finishes booting."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SERVER_START_TIMEOUT
    while True:
        try:
            return await open_client(address, namespace, connect_timeout=5.0)
        except CliError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


@contextlib.contextmanager
def _simulator(opts: StackOptions) -> Iterator[str | None]:
    """Run the vast.ai simulator in-process unless a real key is configured.

    Yields the simulator URL, or None when a real vast.ai account is used or
    the simulator is not installed. VAST_API_URL/VAST_API_KEY are exported for
    the worker's settings and restored afterwards.
    """
    if os.environ.get("VAST_API_KEY"):
        yield None
        return
    try:
        from fleet_agent.sim import DEFAULT_API_KEY, SimServer, StateError
    except ImportError:
        print("vast.ai simulator not available (fleet_agent.sim): running without a fleet")
        yield None
        return
    saved = {k: os.environ.get(k) for k in ("VAST_API_URL", "VAST_API_KEY")}
    try:
        server = SimServer(
            seed=opts.sim_seed,
            speed=opts.sim_speed,
            scenario=opts.sim_scenario,
            rate_limits=opts.sim_rate_limits,
            state_path=opts.sim_state,
        )
    except StateError as exc:
        raise CliError(f"{exc}; remove the file to start a fresh simulated market") from None
    with server as sim:
        os.environ["VAST_API_URL"] = sim.url
        os.environ["VAST_API_KEY"] = DEFAULT_API_KEY
        try:
            yield sim.url
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _banner(
    opts: StackOptions,
    server: _Server,
    namespace: str,
    sim_url: str | None,
    settings: Settings,
    db_url: str,
    provider: str,
) -> str:
    env = "" if server.address == "127.0.0.1:7233" else f"TEMPORAL_ADDRESS={server.address} "
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
        "try:",
        f'  {env}.venv/bin/fleet-agent ask{agent} "how is the fleet?"',
        f"  {env}.venv/bin/fleet-agent fleet{agent}",
        f"  {env}.venv/bin/fleet-agent status{agent}",
        f"  {env}.venv/bin/fleet-agent runs{agent}",
        f"  .venv/bin/temporal workflow query --address {server.address} "
        f"--workflow-id {opts.agent_id} --type status",
    ]
    if not opts.check:
        lines.append("Ctrl-C stops everything.")
    return "\n".join(lines)


async def _first_run(agent: AgentClient, within: float) -> AgentStatus:
    """Ask for a run now and wait until it has finished (the `--check` smoke test)."""
    baseline = (await agent.status()).run_count
    await agent.signal("trigger_now", {"reason": "fleet-agent up --check"})
    st: AgentStatus | None = None
    try:
        async with asyncio.timeout(within):
            while True:
                st = await agent.status()
                if st.last_run is not None and st.last_run.run > baseline:
                    return st
                await asyncio.sleep(CHECK_POLL_INTERVAL)
    except TimeoutError:
        phase = "unknown" if st is None else st.phase.value
        raise CliError(f"no run finished within {within:g}s (phase: {phase})") from None


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def up(opts: StackOptions) -> int:
    """Run the local stack until stopped (or, with `check`, until the first run ends)."""
    config = _dev_config(opts)
    try:
        # Read once up front so a bad FLEET_LLM_PROVIDER (or an unknown
        # FLEET_LLM_MODEL) fails before anything starts.
        settings = Settings.from_env()
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        # Before any client connects: the clients' runtime carries the telemetry.
        _, metrics_line = install_stack_metrics(os.environ)
    except MetricsUnavailable as exc:
        raise CliError(str(exc)) from None
    stop = _stop_event()
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(_temporal_server(config))
        client = await _connect(server.address, config.namespace)
        sim_url = stack.enter_context(_simulator(opts))
        settings = Settings.from_env()  # again: the simulator exported VAST_API_*
        db_url = settings.database_url or default_database_url()
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
        provider = provider_from_settings(settings)
        model = getattr(provider, "model", None)
        # The same fleet wiring as `python worker.py`: vast.ai, or the simulator above.
        fleet = fleet_from_settings(settings, store)
        worker = build_worker(
            client,
            store=store,
            provider=provider,
            fleet=fleet,
            task_queue=opts.task_queue,
            prices=settings.llm_models,
        )
        worker_task = asyncio.create_task(worker.run())
        stack.push_async_callback(_stop_worker, worker_task, worker.shutdown)
        agent = AgentClient(client, opts.agent_id, task_queue=opts.task_queue)
        # Without a fleet there is nothing to poll: a fresh agent starts without its monitor.
        started = await agent.start(None if fleet else ConfigPatch(monitor_enabled=False))
        print(
            _banner(
                opts,
                server,
                config.namespace,
                sim_url,
                settings,
                db_url,
                f"{provider.name}" + (f" ({model})" if model else ""),
            ),
            flush=True,
        )
        print(metrics_line, flush=True)
        print(f"agent {'started' if started else 'was already running: attached'}", flush=True)
        waiters: set[asyncio.Task[Any]] = {worker_task, asyncio.create_task(stop.wait())}
        check = asyncio.create_task(_first_run(agent, opts.check_timeout)) if opts.check else None
        if check is not None:
            waiters.add(check)
        done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        for task in pending - {worker_task}:
            task.cancel()
        if worker_task in done:
            raise CliError(f"the worker stopped: {worker_task.exception()!r}")
        if check is not None and check in done:
            return _check_summary(check.result())
        print("stopping…", flush=True)
    return 0


async def _stop_worker(task: asyncio.Task[None], shutdown: Callable[[], Awaitable[None]]) -> None:
    if not task.done():
        await shutdown()
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await task


def _check_summary(st: AgentStatus) -> int:
    last = st.last_run
    assert last is not None  # _first_run returns only once a run has finished
    print(f"check: run {last_run_text(last)}", flush=True)
    print(f"check: session {st.session}, {st.run_count} run(s), phase {st.phase.value}", flush=True)
    return 0 if last.status == RunStatus.OK else 1
