"""Options the `fleet-agent` commands share: the agent, Temporal, the store, JSON."""

from __future__ import annotations

import argparse
import os

from starter.agent_client import DEFAULT_CONNECT_TIMEOUT, DEFAULT_QUERY_TIMEOUT
from workflows.policies import TASK_QUEUE

__all__ = [
    "AGENT_ID_ENV",
    "DEFAULT_AGENT_ID",
    "agent_options",
    "json_option",
    "new_store_option",
    "port_number",
    "temporal_options",
]

AGENT_ID_ENV = "FLEET_AGENT_ID"
DEFAULT_AGENT_ID = "fleet-agent"


def port_number(text: str) -> int:
    """A TCP port number (for --port and its environment default)."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return port


def agent_options(parser: argparse.ArgumentParser, *, temporal: bool) -> None:
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
        temporal_options(parser)
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


def temporal_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--address", help="Temporal frontend host:port (env TEMPORAL_ADDRESS)")
    parser.add_argument("--namespace", help="Temporal namespace (env TEMPORAL_NAMESPACE)")
    parser.add_argument("--profile", help="env config profile (env TEMPORAL_PROFILE)")


def new_store_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--new-store",
        action="store_true",
        help="accept a new, empty store although agents are running: their old run log "
        "and conversation are not in it (env FLEET_NEW_STORE=1)",
    )


def json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
