"""`fleet-agent`: the operator's command line for one fleet's agent.

Agent commands talk to Temporal (TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE / env
config profiles, or --address/--namespace/--profile); `runs`, `show-run` and
`session` read the run log (FLEET_DATABASE_URL); `worker`, `sim`, `up` and
`console` run services.
Errors end with one line on stderr: exit code 2 for a wrong command line, 1
for an operational failure, 124 when `ask` stops waiting, 141 when the reader
of a pipe went away. See docs/OPERATIONS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from temporalio.client import Client
from temporalio.service import RPCError

from fleet_agent.env_file import SettingsError, export_env_file
from starter import commands
from starter.agent_client import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_QUERY_TIMEOUT,
    AgentClient,
    CliError,
    UsageError,
    connect_failure,
    open_client,
    resolved_address,
)
from starter.cost_view import totals_line
from starter.fleet_render import fleet_text
from starter.fleet_view import read_fleet_view
from starter.runlog_view import (
    open_store,
    read_run,
    read_runs,
    read_session_totals,
    run_detail,
    runs_table,
)
from starter.session_view import (
    read_session_summaries,
    read_summary_of_run,
    summaries_text,
    summary_text,
)
from workflows.policies import TASK_QUEUE

__all__ = ["build_parser", "main", "run"]

PROG = "fleet-agent"
AGENT_ID_ENV = "FLEET_AGENT_ID"
DEFAULT_AGENT_ID = "fleet-agent"

# Exit codes (docs/OPERATIONS.md): 0 ok, 1 operational error, 2 usage error
# (argparse's, and UsageError), ANSWER_TIMEOUT_EXIT, 130 interrupted, and this.
EXIT_BROKEN_PIPE = 141
# `ask` / `say --wait`: a run takes seconds to minutes (debounce, LLM rounds).
DEFAULT_ANSWER_TIMEOUT = 300.0

Handler = Callable[[argparse.Namespace], int]
AgentCommand = Callable[[AgentClient, argparse.Namespace], Awaitable[int]]


# ---------------------------------------------------------------- handlers


async def _say(agent: AgentClient, args: argparse.Namespace) -> int:
    if args.wait:
        return await commands.ask(agent, args.text, args.author, args.timeout, args.json)
    if args.json:
        raise UsageError("--json prints the answer: use it with --wait (or `ask`)")
    return await commands.say(agent, args.text, args.author)


def _agent(command: AgentCommand) -> Handler:
    """Connect, build the `AgentClient` for --agent-id, run `command`."""

    async def run(args: argparse.Namespace) -> int:
        def connect() -> Awaitable[Client]:
            return open_client(
                args.address, args.namespace, args.profile, connect_timeout=args.connect_timeout
            )

        # `ask` waits minutes for an answer; its calls to Temporal keep the usual bound.
        query_timeout = min(args.timeout, DEFAULT_QUERY_TIMEOUT) if args.waits else args.timeout
        agent = AgentClient(
            connect, args.agent_id, task_queue=args.task_queue, query_timeout=query_timeout
        )
        return await command(agent, args)

    return lambda args: asyncio.run(run(args))


def _runs(args: argparse.Namespace) -> int:
    runs = read_runs(args.agent_id, args.limit, args.session)
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in runs], indent=2, ensure_ascii=False))
    else:
        print(runs_table(runs))
        if args.session is not None:
            totals = read_session_totals(args.agent_id, args.session)
            print(totals_line(f"session {args.session}", totals))
    return 0


def _fleet(args: argparse.Namespace) -> int:
    store = open_store()
    try:
        view = read_fleet_view(store, args.agent_id)
    finally:
        store.dispose()
    if args.json:
        print(view.model_dump_json(indent=2))
    else:
        print(fleet_text(view, datetime.now(UTC)))
    return 0


def _show_run(args: argparse.Namespace) -> int:
    record, attempts, messages = read_run(args.agent_id, args.run, args.attempt)
    summary = read_summary_of_run(args.agent_id, args.run)
    if args.json:
        data = {
            "run": record.model_dump(mode="json"),
            "attempts": [a.model_dump(mode="json") for a in attempts],
            "messages": [m.model_dump(mode="json") for m in messages],
            "summary": None if summary is None else summary.model_dump(mode="json"),
        }
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(run_detail(record, messages, attempts))
        if summary is not None:
            print(f"\nIn the session's {summary_text(summary)}")
    return 0


def _session(args: argparse.Namespace) -> int:
    session, summaries = read_session_summaries(args.agent_id, args.session)
    if args.json:
        data = {"session": session, "summaries": [s.model_dump(mode="json") for s in summaries]}
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        print(summaries_text(session, summaries))
    return 0


def _console(args: argparse.Namespace) -> int:
    """Serve the web console until interrupted (nothing connects before the first page)."""
    # Imported here: only this command needs the web stack.
    from starter.console import ConsoleSettings, serve

    def connect() -> Awaitable[Client]:
        return open_client(
            args.address, args.namespace, args.profile, connect_timeout=args.connect_timeout
        )

    agent = AgentClient(
        connect, args.agent_id, task_queue=args.task_queue, query_timeout=args.timeout
    )
    namespace = args.namespace or os.environ.get("TEMPORAL_NAMESPACE") or "default"
    serve(agent, ConsoleSettings(ui_url=args.ui_url, namespace=namespace), args.host, args.port)
    return 0


def _port(text: str) -> int:
    """A TCP port number (for --port and its environment default)."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return port


def _worker(args: argparse.Namespace) -> int:
    """`python worker.py` with optional connection overrides (read by env config)."""
    # Imported here: only the service commands need the activities and providers.
    import worker
    from fleet_agent.settings import Settings
    from fleet_agent.store import SchemaError, StoreRefused
    from fleet_agent.tuning import WorkerTuning
    from starter.telemetry import MetricsUnavailable

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
        if not str(exc).startswith("Failed client connect"):
            raise
        raise CliError(f"cannot reach Temporal at {where}: {connect_failure(exc)}") from None
    return 0


def _sim(args: argparse.Namespace) -> int:
    # Imported here: the simulator is optional and `fleet-agent` must work without it.
    try:
        from fleet_agent.sim import DEFAULT_API_KEY, SCENARIOS, StateError, serve
    except ImportError as exc:
        raise CliError(f"the vast.ai simulator (fleet_agent.sim) is not available: {exc}") from None
    if args.scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {args.scenario!r}; choose from {', '.join(SCENARIOS)}")
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
        )
    except StateError as exc:
        raise CliError(f"{exc}; remove it, or pass --no-state, to start a fresh market") from None
    return 0


def _up(args: argparse.Namespace) -> int:
    from starter.stack_options import up_main

    return up_main(args)


# ---------------------------------------------------------------- parser


def _agent_options(parser: argparse.ArgumentParser, *, temporal: bool) -> None:
    """Options every agent command takes, after the subcommand name."""
    parser.add_argument(
        "--agent",
        "--agent-id",
        dest="agent_id",
        metavar="ID",
        default=os.environ.get(AGENT_ID_ENV) or DEFAULT_AGENT_ID,
        help=f"workflow ID of the agent (env {AGENT_ID_ENV}; default %(default)s)",
    )
    # Advanced: tests run agents on their own queue. Operators keep the default.
    parser.add_argument("--task-queue", default=TASK_QUEUE, help=argparse.SUPPRESS)
    if temporal:
        _temporal_options(parser)
        parser.add_argument(
            "--connect-timeout",
            type=float,
            default=DEFAULT_CONNECT_TIMEOUT,
            metavar="SECONDS",
            help="give up connecting after this long (default %(default)g)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_QUERY_TIMEOUT,
            metavar="SECONDS",
            help="give up waiting for the agent's answer after this long (default %(default)g)",
        )


def _temporal_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", help="Temporal frontend host:port (env TEMPORAL_ADDRESS)")
    parser.add_argument("--namespace", help="Temporal namespace (env TEMPORAL_NAMESPACE)")
    parser.add_argument("--profile", help="env config profile (env TEMPORAL_PROFILE)")


def _new_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--new-store",
        action="store_true",
        help="accept a new, empty store although agents are running: their old run log "
        "and conversation are not in it (env FLEET_NEW_STORE=1)",
    )


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Operate a fleet-agent: talk to it, inspect it, run the local stack.",
        epilog="Operator guide: docs/OPERATIONS.md",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def agent_cmd(name: str, help: str, command: AgentCommand) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        _agent_options(p, temporal=True)
        p.set_defaults(handler=_agent(command), waits=False)
        return p

    def asking(p: argparse.ArgumentParser) -> None:
        """`ask`, and `say --wait`: --timeout bounds the wait for the answer."""
        p.add_argument("text")
        p.add_argument("--author", help="who is talking (default: operator)")
        p.set_defaults(timeout=DEFAULT_ANSWER_TIMEOUT)
        _json_option(p)

    p = agent_cmd(
        "start",
        "start the agent (or attach to the running one)",
        lambda a, ns: commands.start(a, ns.target, ns.paused, ns.set),
    )
    p.add_argument("--target", type=float, metavar="N", help="target proofs per hour")
    p.add_argument("--paused", action="store_true", help="start paused (no runs until unpaused)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="initial config")

    p = agent_cmd(
        "say",
        "send the agent a message (starts it if it is not running); "
        "--wait: wait for its answer, as `ask` does",
        _say,
    )
    asking(p)
    p.add_argument(
        "--wait",
        action="store_true",
        help="wait (up to --timeout seconds) for the run that handles the message, "
        "and print its answer",
    )
    p.set_defaults(waits=True)

    p = agent_cmd(
        "ask",
        "send the agent a message and print its answer (say --wait)",
        lambda a, ns: commands.ask(a, ns.text, ns.author, ns.timeout, ns.json),
    )
    asking(p)
    p.set_defaults(waits=True)

    p = agent_cmd(
        "trigger",
        "ask for a run now (starts the agent if it is not running)",
        lambda a, ns: commands.trigger(a, ns.reason),
    )
    p.add_argument("--reason")

    p = agent_cmd(
        "reset",
        "start a new conversation session after the current run",
        lambda a, ns: commands.reset(a, ns.reason),
    )
    p.add_argument("--reason")

    p = agent_cmd(
        "cancel-wake",
        "drop a pending wake",
        lambda a, ns: commands.cancel_wake(a, ns.wake_id),
    )
    p.add_argument("wake_id", metavar="WAKE_ID")

    p = agent_cmd(
        "freeze",
        "kill switch: stop runs, the monitor and every fleet change "
        "(--destroy-all: destroy every machine too)",
        lambda a, ns: commands.freeze(a, ns.reason, ns.destroy_all, ns.author, ns.wait),
    )
    p.add_argument("--reason")
    p.add_argument("--author", help="who freezes it (default: operator)")
    p.add_argument(
        "--destroy-all",
        action="store_true",
        help="destroy every machine of this agent and wait until vast.ai lists none",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="how long to wait for the answer (default 900: destroying takes time)",
    )

    p = agent_cmd(
        "approvals",
        "list the approvals the agent's run waits for",
        lambda a, ns: commands.approvals(a, ns.json),
    )
    _json_option(p)
    for verb, what in (
        ("approve", "let the waiting run make this change"),
        ("deny", "refuse this change; the run reads the note"),
    ):
        p = agent_cmd(
            verb,
            what,
            lambda a, ns: commands.decide(
                a, ns.approval_id, ns.command == "approve", ns.note, ns.author
            ),
        )
        p.add_argument("approval_id", metavar="ID", help="as `fleet-agent approvals` lists it")
        p.add_argument("--note", help="why (the model reads it)")
        p.add_argument("--author", help="who decides (default: operator)")

    p = agent_cmd(
        "unfreeze",
        "undo freeze: runs and the monitor resume, and the next run re-plans",
        lambda a, ns: commands.unfreeze(a, ns.reason, ns.author),
    )
    p.add_argument("--reason")
    p.add_argument("--author", help="who unfreezes it (default: operator)")

    p = agent_cmd("wakes", "list pending wakes", lambda a, ns: commands.wakes(a, ns.json))
    _json_option(p)

    p = agent_cmd("status", "what the agent is doing", lambda a, ns: commands.status(a, ns.json))
    _json_option(p)

    p = agent_cmd(
        "config",
        "show the config, or change it with --set",
        lambda a, ns: commands.config(a, ns.set, ns.json),
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="value as JSON if it parses, else text; lists comma-separated",
    )
    _json_option(p)

    p = sub.add_parser(
        "runs",
        help="the run log",
        description="The run log, from the store: every run, and every replay of a run "
        "after a reset (#12 replay 2).",
    )
    _agent_options(p, temporal=False)
    p.add_argument(
        "--limit",
        type=int,
        default=20,
        help="newest N records, replays included (default %(default)s)",
    )
    p.add_argument("--session", type=int, help="only runs of this session")
    _json_option(p)
    p.set_defaults(handler=_runs)

    p = sub.add_parser(
        "fleet",
        help="the fleet: machines, capacity against target, $/h and spend today",
        description="Each machine with its GPU, state, measured and expected proofs/h, "
        "$/h, age, host and flags, then the totals, as of the monitor's last poll (from the "
        "store: no vast.ai call). The spend comes from the ledger.",
    )
    _agent_options(p, temporal=False)
    _json_option(p)
    p.set_defaults(handler=_fleet)

    p = sub.add_parser("show-run", help="one run in full: triggers, messages, record")
    _agent_options(p, temporal=False)
    p.add_argument("run", type=int, metavar="N")
    p.add_argument(
        "--attempt",
        type=int,
        metavar="K",
        help="which execution of the run (1 = the original; default: the latest)",
    )
    _json_option(p)
    p.set_defaults(handler=_show_run)

    p = sub.add_parser(
        "session",
        help="the session's rolling summaries",
        description="The runs that left the prompt's window, as the session's summary "
        "holds them: every version, newest last (from the store).",
    )
    _agent_options(p, temporal=False)
    p.add_argument(
        "session", type=int, nargs="?", metavar="N", help="session number (default: the newest)"
    )
    _json_option(p)
    p.set_defaults(handler=_session)

    p = sub.add_parser(
        "console",
        help="serve the web console",
        description="A web console for the agent: run log, transcripts, chat, wakes, "
        "approvals, the fleet and its last 24 h. Binds to 127.0.0.1 by default.",
    )
    _agent_options(p, temporal=True)
    p.add_argument(
        "--port",
        type=_port,
        # A string default goes through `type` too: a bad CONSOLE_PORT is a usage error.
        default=os.environ.get("CONSOLE_PORT") or "8080",
        help="port to serve on (env CONSOLE_PORT; default 8080)",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default %(default)s)")
    p.add_argument(
        "--ui-url",
        default=os.environ.get("TEMPORAL_UI_URL") or "http://localhost:8233",
        help="the Temporal Web UI, for links to runs (env TEMPORAL_UI_URL; default %(default)s)",
    )
    p.set_defaults(handler=_console)

    p = sub.add_parser("worker", help="run a worker (same as python worker.py)")
    _temporal_options(p)
    _new_store_option(p)
    p.set_defaults(handler=_worker)

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
    p.set_defaults(handler=_sim)

    p = sub.add_parser(
        "up",
        help="run the whole local stack (make run)",
        description="Temporal dev server, vast.ai simulator, worker and agent in one process.",
    )
    _agent_options(p, temporal=False)
    p.add_argument("--check", action="store_true", help="exit after the first run (smoke test)")
    p.add_argument("--check-timeout", type=float, default=60.0, help=argparse.SUPPRESS)
    p.add_argument(
        "--port",
        type=_port,
        help="Temporal dev server gRPC port (env TEMPORAL_PORT; default from temporal-dev.yaml)",
    )
    p.add_argument(
        "--ui-port",
        type=_port,
        help="Temporal Web UI port (env TEMPORAL_UI_PORT; default from temporal-dev.yaml)",
    )
    p.add_argument(
        "--console-port", type=_port, help="web console port (env CONSOLE_PORT; default 8080)"
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
    _new_store_option(p)
    p.add_argument("--sim-seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--sim-speed", type=float, default=1.0, help=argparse.SUPPRESS)
    p.add_argument("--sim-scenario", default="realistic", help=argparse.SUPPRESS)
    p.add_argument("--sim-state", help=argparse.SUPPRESS)
    p.add_argument("--sim-no-rate-limits", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(handler=_up)
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    """Run one command and return its exit code (argv defaults to sys.argv[1:])."""
    try:
        # Before the parser: its defaults (FLEET_AGENT_ID, CONSOLE_PORT …) and
        # every command's reads then see the .env file, the environment winning.
        export_env_file()
    except SettingsError as exc:  # a bad FLEET_ENV_FILE: a setting, as CliError's 1
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        code = handler(args)
        # A reader that went away shows when the output is flushed: here, not at exit.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _reader_gone()
    except CliError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except RPCError as exc:  # a service error no command anticipated: still one line
        print(f"{PROG}: error: Temporal: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _reader_gone() -> int:
    """`fleet-agent runs | head`: the reader closed the pipe. Stop quietly, as
    a program killed by SIGPIPE would look to the shell (128 + 13)."""
    # Later flushes (the one at exit included) must not fail again: send the
    # rest of stdout nowhere.
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    """The `fleet-agent` entry point; `main(argv)` returns the exit code (for tests).

    Called without argv (the console script), it ends the process itself once
    the command is done: the Temporal SDK's native threads can abort a
    short-lived client process while the interpreter finalizes
    (temporalio/sdk-python#300), which would turn a clean exit into SIGABRT.
    Everything the command owns is closed by then; only output is flushed.
    """
    code = run(argv)
    if argv is not None:
        return code
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)
