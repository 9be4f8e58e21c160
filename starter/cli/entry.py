"""`fleet-agent`: the operator's command line for one fleet's agent.

Agent commands (here) talk to Temporal (TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE
/ env config profiles, or --address/--namespace/--profile); `runs`, `fleet`,
`show-run` and `session` read the store (FLEET_DATABASE_URL;
starter/cli/store_commands.py); `worker`, `sim`, `up` and `console` run services
(starter/cli/service_commands.py); the options they share are in starter/cli/options.py.
Every message and decision is sent as the OS account running the command,
``user@host`` (starter/identity.py): there is no --author.
Errors end with one line on stderr: exit code 2 for a wrong command line, 1
for an operational failure, 124 when `ask` stops waiting, 141 when the reader
of a pipe went away. See docs/OPERATIONS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Sequence

from temporalio.client import Client
from temporalio.service import RPCError

from fleet_agent.env.env_file import SettingsError, export_env_file
from runtime.process_exit import end_process
from starter.agent_client import (
    DEFAULT_QUERY_TIMEOUT,
    AgentClient,
    CliError,
    UsageError,
    open_client,
)
from starter.cli import agent_commands as commands
from starter.cli import cancel, expect
from starter.cli.notify_commands import add_notify_commands
from starter.cli.options import agent_options, json_option
from starter.cli.service_commands import add_service_commands, run_router
from starter.cli.store_commands import add_store_commands
from starter.identity import os_identity
from starter.watchdog_schedule import WATCHDOG_ENV, watchdog_interval

__all__ = ["build_parser", "main", "run"]

PROG = "fleet-agent"

# Exit codes (docs/operations/talk.md): 0 ok, 1 operational error, 2 usage error
# (argparse's, and UsageError), ANSWER_TIMEOUT_EXIT, 130 interrupted, and this.
EXIT_BROKEN_PIPE = 141
# `ask` / `say --wait`: a run takes seconds to minutes (debounce, LLM rounds).
DEFAULT_ANSWER_TIMEOUT = 300.0

Handler = Callable[[argparse.Namespace], int]
AgentCommand = Callable[[AgentClient, argparse.Namespace], Awaitable[int]]


# ---------------------------------------------------------------- handlers


async def _say(agent: AgentClient, args: argparse.Namespace) -> int:
    if args.wait:
        return await commands.ask(agent, args.text, os_identity(), args.timeout, args.json)
    if args.json:
        raise UsageError("--json prints the answer: use it with --wait (or `ask`)")
    return await commands.say(agent, args.text, os_identity())


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


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Operate a fleet-agent: talk to it, inspect it, run the local stack.",
        epilog="Operator guide: docs/OPERATIONS.md",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def agent_cmd(name: str, help: str, command: AgentCommand) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help)
        agent_options(p, temporal=True)
        p.set_defaults(handler=_agent(command), waits=False)
        return p

    def asking(p: argparse.ArgumentParser) -> None:
        """`ask`, and `say --wait`: --timeout bounds the wait for the answer."""
        p.add_argument("text")
        p.set_defaults(timeout=DEFAULT_ANSWER_TIMEOUT)
        json_option(p)

    p = agent_cmd(
        "start",
        "start the agent (or attach to the running one), and create or update its "
        "watchdog, which starts it again if it ends",
        lambda a, ns: commands.start(
            a, ns.target, ns.paused, ns.set, watchdog_interval(ns.watchdog_minutes)
        ),
    )
    p.add_argument("--target", type=float, metavar="N", help="target proofs per hour")
    p.add_argument("--paused", action="store_true", help="start paused (no runs until unpaused)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="initial config")
    p.add_argument(
        "--watchdog-minutes",
        type=float,
        metavar="N",
        help=f"how often the watchdog looks (default ${WATCHDOG_ENV}, else 5; "
        "fractions allowed, at least 1 second)",
    )

    p = agent_cmd(
        "cancel",
        "stop the agent for good: delete its watchdog, then cancel its workflow "
        "(asks first unless --yes)",
        lambda a, ns: cancel.cancel(a, ns.yes, ns.wait),
    )
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument(
        "--wait",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long to wait for the agent to end (default 60)",
    )

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
        lambda a, ns: commands.ask(a, ns.text, os_identity(), ns.timeout, ns.json),
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
        lambda a, ns: commands.freeze(a, ns.reason, ns.destroy_all, os_identity(), ns.wait),
    )
    p.add_argument("--reason")
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
    json_option(p)
    for verb, what in (
        ("approve", "let the waiting run make this change"),
        ("deny", "refuse this change; the run reads the note"),
    ):
        p = agent_cmd(
            verb,
            what,
            lambda a, ns: commands.decide(
                a, ns.approval_id, ns.command == "approve", ns.note, os_identity()
            ),
        )
        p.add_argument("approval_id", metavar="ID", help="as `fleet-agent approvals` lists it")
        p.add_argument("--note", help="why (the model reads it)")

    p = agent_cmd(
        "unfreeze",
        "undo freeze: runs and the monitor resume, and the next run re-plans",
        lambda a, ns: commands.unfreeze(a, ns.reason, os_identity()),
    )
    p.add_argument("--reason")

    p = agent_cmd("wakes", "list pending wakes", lambda a, ns: commands.wakes(a, ns.json))
    json_option(p)

    p = agent_cmd("status", "what the agent is doing", lambda a, ns: commands.status(a, ns.json))
    json_option(p)

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
    json_option(p)

    p = agent_cmd(
        "expect",
        "add a known demand event (times UTC), e.g. `expect 3x 14:00-16:00`; "
        "--list shows them, --clear removes them",
        lambda a, ns: expect.expect(
            a, ns.multiplier, ns.window, ns.date, ns.note, ns.list, ns.clear, ns.json
        ),
    )
    p.add_argument("multiplier", nargs="?", metavar="MULTIPLIER", help="e.g. 3x")
    p.add_argument("window", nargs="?", metavar="HH:MM-HH:MM", help="UTC, e.g. 14:00-16:00")
    p.add_argument(
        "--date", metavar="YYYY-MM-DD", help="UTC day (default today, or tomorrow once ended)"
    )
    p.add_argument("--note", help="what the event is (shown to the model)")
    p.add_argument("--list", action="store_true", help="list the known events")
    p.add_argument("--clear", action="store_true", help="remove every known event")
    json_option(p)

    add_store_commands(sub)
    add_service_commands(sub)
    add_notify_commands(sub)
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
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["router"]:
        # Its options are the router's own, `--help` included (argparse's
        # remainder would take none that starts with a dash).
        return run_router(argv[1:])
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
    Everything the command owns is closed by then; only output is flushed
    (runtime/process_exit.py).
    """
    code = run(argv)
    if argv is not None:
        return code
    end_process(code)
