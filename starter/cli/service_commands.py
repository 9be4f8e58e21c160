"""`fleet-agent console`, `worker`, `sim` and `up`: the commands that run
services. Each imports what it runs only when it runs, so the reading
commands start fast and never load the worker (tests/layers/test_layers.py)."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Awaitable
from typing import Any

from temporalio.client import Client

from runtime.connect import is_connect_failure, unreachable
from starter.agent_client import (
    AgentClient,
    CliError,
    UsageError,
    open_client,
    resolved_address,
)
from starter.cli.options import agent_options, new_store_option, port_number, temporal_options

__all__ = ["add_service_commands"]


def _console(args: argparse.Namespace) -> int:
    """Serve the web console until interrupted (nothing connects before the first page)."""
    # Imported here: only this command needs the web stack.
    from starter.console import ConsoleSettings, serve
    from starter.console.auth import TOKEN_ENV, parse_tokens
    from starter.console.tls import check_transport, console_tls
    from starter.console.web import ALLOWED_HOSTS_ENV, allowed_hosts_for

    # The transport before anything else: the certificate and key load (or
    # fail, naming them), and a bind beyond loopback without them is refused.
    tls = console_tls(args.tls_cert, args.tls_key)
    check_transport(args.host, tls, args.insecure_http)

    def connect() -> Awaitable[Client]:
        return open_client(
            args.address, args.namespace, args.profile, connect_timeout=args.connect_timeout
        )

    agent = AgentClient(
        connect, args.agent_id, task_queue=args.task_queue, query_timeout=args.timeout
    )
    namespace = args.namespace or os.environ.get("TEMPORAL_NAMESPACE") or "default"
    settings = ConsoleSettings(
        ui_url=args.ui_url,
        namespace=namespace,
        allowed_hosts=allowed_hosts_for(args.host, os.environ.get(ALLOWED_HOSTS_ENV)),
        tokens=parse_tokens(os.environ.get(TOKEN_ENV)),
    )
    serve(agent, settings, args.host, args.port, tls=tls, insecure_http=args.insecure_http)
    return 0


def _worker(args: argparse.Namespace) -> int:
    """`python worker.py` with optional connection overrides (read by env config)."""
    # Imported here: only the service commands need the activities and providers.
    import worker
    from fleet_agent.config.settings import Settings
    from fleet_agent.config.tuning import WorkerTuning
    from fleet_agent.store import SchemaError, StoreRefused
    from runtime.telemetry import MetricsUnavailable

    for env, value in (
        ("TEMPORAL_ADDRESS", args.address),
        ("TEMPORAL_NAMESPACE", args.namespace),
        ("TEMPORAL_PROFILE", args.profile),
    ):
        if value:
            os.environ[env] = value
    try:
        # A bad FLEET_LLM_PROVIDER, or a FLEET_LLM_MODEL with no known price,
        # is a mistake to report at start, not a crash (or a failed first run);
        # so is a bad FLEET_WORKER_* (worker.main reads the tuning again).
        settings = Settings.from_env()
        WorkerTuning.from_env()
    except ValueError as exc:
        raise CliError(str(exc)) from None
    where = resolved_address(None, args.profile)
    try:
        # Without the flag FLEET_NEW_STORE decides.
        asyncio.run(worker.main(new_store=True if args.new_store else None, settings=settings))
    except (StoreRefused, SchemaError, MetricsUnavailable) as exc:
        raise CliError(str(exc)) from None
    except RuntimeError as exc:
        if not is_connect_failure(exc):
            raise
        raise CliError(unreachable(where, exc)) from None
    return 0


def run_router(argv: list[str]) -> int:
    """``fleet-agent router ...``: `python -m router` with the same arguments
    (router/__main__.py); a process of its own on the operator's host."""
    from router.__main__ import main as router_main

    try:
        router_main(argv, prog="fleet-agent router")
    except SystemExit as exc:  # --help, a usage error
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return 0


def _router(args: argparse.Namespace) -> int:
    return run_router(list(args.router_args))


def _sim(args: argparse.Namespace) -> int:
    # Imported here: the simulator is optional and `fleet-agent` must work without it.
    try:
        from simulator import DEFAULT_API_KEY, SCENARIOS, StateError, demand_from_options, serve
    except ImportError as exc:
        raise CliError(f"the vast.ai simulator (simulator) is not available: {exc}") from None
    if args.scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {args.scenario!r}; choose from {', '.join(SCENARIOS)}")
    try:
        demand = demand_from_options(
            args.demand_curve,
            args.demand_event,
            args.demand_burst_rate,
            args.demand_deadline_minutes,
            args.demand_seed,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        serve(
            args.host,
            args.port,
            args.seed,
            args.speed,
            args.api_key or DEFAULT_API_KEY,
            args.scenario,
            offers=args.offers,
            rate_limits=not args.no_rate_limits,
            state_path=None if args.no_state else args.state,
            demand=demand,
        )
    except StateError as exc:
        raise CliError(f"{exc}; remove it, or pass --no-state, to start a fresh market") from None
    return 0


def _up(args: argparse.Namespace) -> int:
    from starter.stack.launch import up_main

    return up_main(args)


def add_service_commands(sub: Any) -> None:
    """The service commands on `sub` (the parser's subparsers)."""
    p = sub.add_parser(
        "console",
        help="serve the web console",
        description="A web console for the agent: run log, transcripts, chat, wakes, "
        "approvals, the fleet and its last 24 h. Binds to 127.0.0.1 by default.",
    )
    agent_options(p, temporal=True)
    p.add_argument(
        "--port",
        type=port_number,
        # A string default goes through `type` too: a bad CONSOLE_PORT is a usage error.
        default=os.environ.get("CONSOLE_PORT") or "8080",
        help="port to serve on (env CONSOLE_PORT; default 8080)",
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default %(default)s); any other than loopback needs a token "
        "(env CONSOLE_TOKEN, or one generated and shown at start) and TLS (--tls-cert and "
        "--tls-key) or --insecure-http",
    )
    p.add_argument(
        "--tls-cert",
        metavar="PEM",
        default=os.environ.get("CONSOLE_TLS_CERT") or None,
        help="serve https with this certificate (its chain after it; env CONSOLE_TLS_CERT)",
    )
    p.add_argument(
        "--tls-key",
        metavar="PEM",
        default=os.environ.get("CONSOLE_TLS_KEY") or None,
        help="the certificate's private key, unencrypted (env CONSOLE_TLS_KEY)",
    )
    p.add_argument(
        "--insecure-http",
        action="store_true",
        help="bound beyond loopback without TLS, serve plain http anyway: the token "
        "crosses the network in the clear (a network you trust, or a TLS proxy in front)",
    )
    p.add_argument(
        "--ui-url",
        default=os.environ.get("TEMPORAL_UI_URL") or "http://localhost:8233",
        help="the Temporal Web UI, for links to runs (env TEMPORAL_UI_URL; default %(default)s)",
    )
    p.set_defaults(handler=_console)

    p = sub.add_parser("worker", help="run a worker (same as python worker.py)")
    temporal_options(p)
    new_store_option(p)
    p.set_defaults(handler=_worker)

    p = sub.add_parser(
        "router",
        help="run the cuzk router: the operator's Curio node's [Cuzk] Address",
        description="Every option is the router's own: fleet-agent router --help shows them.",
        add_help=False,
    )
    p.add_argument("router_args", nargs=argparse.REMAINDER)
    p.set_defaults(handler=_router)

    p = sub.add_parser("sim", help="run the vast.ai simulator alone")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--speed", type=float, default=1.0, help="sim seconds per real second")
    p.add_argument("--scenario", default="realistic", help="ideal, realistic or chaos")
    p.add_argument("--api-key", help="key the simulator accepts (default: its public test key)")
    p.add_argument("--offers", type=int, default=10_000, help="offers on the market")
    p.add_argument(
        "--no-rate-limits", action="store_true", help="turn off vast.ai's documented rate limits"
    )
    p.add_argument(
        "--state",
        default="var/sim-state.json",
        help="state file kept across restarts (default var/sim-state.json)",
    )
    p.add_argument("--no-state", action="store_true", help="keep nothing across restarts")
    # The work source's demand (docs/SIMULATOR.md, "Demand: work with deadlines").
    p.add_argument("--demand-curve", help='proofs/hour at UTC hours: "0:100,14:800,22:200"')
    p.add_argument("--demand-event", action="append", help='e.g. "14:00-16:00x3" (repeatable)')
    p.add_argument("--demand-burst-rate", type=float, help="random bursts per sim day")
    p.add_argument("--demand-deadline-minutes", type=float, help="default 30")
    p.add_argument("--demand-seed", type=int, help="seed of the arrivals (default --seed)")
    p.set_defaults(handler=_sim)

    p = sub.add_parser(
        "up",
        help="run the whole local stack (make run)",
        description="Temporal dev server, vast.ai simulator, worker and agent in one process.",
    )
    agent_options(p, temporal=False)
    p.add_argument("--check", action="store_true", help="exit after the first run (smoke test)")
    p.add_argument("--check-timeout", type=float, default=60.0, help=argparse.SUPPRESS)
    p.add_argument(
        "--port",
        type=port_number,
        help="Temporal dev server gRPC port (env TEMPORAL_PORT; default from temporal-dev.yaml)",
    )
    p.add_argument(
        "--ui-port",
        type=port_number,
        help="Temporal Web UI port (env TEMPORAL_UI_PORT; default from temporal-dev.yaml)",
    )
    p.add_argument(
        "--console-port", type=port_number, help="web console port (env CONSOLE_PORT; default 8080)"
    )
    p.add_argument(
        "--db-filename", help="dev server database file (default from temporal-dev.yaml)"
    )
    p.add_argument(
        "--add-worker",
        action="store_true",
        help="with this stack already running: add a worker to it, and nothing else "
        "(without the flag a second `up` only attaches)",
    )
    p.add_argument(
        "--sim-demand",
        metavar="CURVE",
        help='the simulator serves demand, and the worker reads it: "default" (a day for a '
        'small fleet, 60-300 proofs/h) or proofs/hour at UTC hours, "0:60,14:300,20:100"',
    )
    new_store_option(p)
    p.add_argument("--sim-seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--sim-speed", type=float, default=1.0, help=argparse.SUPPRESS)
    p.add_argument("--sim-scenario", default="realistic", help=argparse.SUPPRESS)
    p.add_argument("--sim-state", help=argparse.SUPPRESS)
    p.add_argument("--sim-no-rate-limits", action="store_true", help=argparse.SUPPRESS)
    # The simulated clock starts at the next HH:MM UTC: the same hour of the
    # market's day whenever it runs (its demand and providers follow the hour).
    p.add_argument("--sim-start", metavar="HH:MM", help=argparse.SUPPRESS)
    p.set_defaults(handler=_up)
