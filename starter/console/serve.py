"""Serve the console with uvicorn until interrupted. Binds a TCP port."""

from __future__ import annotations

import asyncio
import socket

import uvicorn

from starter.agent_client import AgentClient, CliError
from starter.console.app import create_app
from starter.console.web import ConsoleSettings

__all__ = ["CONSOLE_PORT_ENV", "DEFAULT_CONSOLE_PORT", "UI_URL_ENV", "serve"]

CONSOLE_PORT_ENV = "CONSOLE_PORT"
UI_URL_ENV = "TEMPORAL_UI_URL"
DEFAULT_CONSOLE_PORT = 8080


def serve(agent: AgentClient, settings: ConsoleSettings, host: str, port: int) -> None:
    """Run the console on host:port (blocks); a port in use is a `CliError`."""
    # Bound here rather than by uvicorn, which logs and exits on a taken port:
    # the operator gets one line naming the port and the variable instead.
    try:
        sock = socket.create_server((host, port))
    except OSError as exc:
        raise CliError(
            f"cannot serve the console on {host}:{port} ({exc.strerror}): "
            f"pass --port or set {CONSOLE_PORT_ENV}"
        ) from None
    app = create_app(agent, settings)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    print(f"console for agent {agent.agent_id!r} on http://{host}:{port}/ (Ctrl-C stops it)")
    with sock:
        asyncio.run(server.serve(sockets=[sock]))
