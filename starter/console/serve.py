"""Serve the console with uvicorn: alone until interrupted (`serve`, the
`console` command), or inside another program's event loop
(`running_console`, for `fleet-agent up` and the tests). Binds a TCP port."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Iterator

import uvicorn

from fleet_agent.store.engine import DATABASE_URL_ENV
from starter.agent_client import AgentClient, CliError
from starter.console.app import create_app
from starter.console.web import ConsoleSettings

__all__ = [
    "CONSOLE_PORT_ENV",
    "DEFAULT_CONSOLE_PORT",
    "UI_URL_ENV",
    "console_for_stack",
    "running_console",
    "serve",
]

CONSOLE_PORT_ENV = "CONSOLE_PORT"
UI_URL_ENV = "TEMPORAL_UI_URL"
DEFAULT_CONSOLE_PORT = 8080
_START_TIMEOUT = 10.0


class _EmbeddedServer(uvicorn.Server):
    """uvicorn without its own SIGINT/SIGTERM handlers: the program that runs
    it (`up`) owns the signals and stops the console on its way out."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _bind(host: str, port: int) -> socket.socket:
    # Bound here rather than by uvicorn, which logs and exits on a taken port:
    # the operator gets one line naming the port and the variable instead.
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        raise CliError(
            f"cannot serve the console on {host}:{port} ({exc.strerror}): "
            f"pass --port or set {CONSOLE_PORT_ENV}"
        ) from None


def _config(agent: AgentClient, settings: ConsoleSettings) -> uvicorn.Config:
    return uvicorn.Config(create_app(agent, settings), log_level="warning", access_log=False)


def serve(agent: AgentClient, settings: ConsoleSettings, host: str, port: int) -> None:
    """Run the console on host:port until Ctrl-C (blocks); a taken port is a `CliError`."""
    sock = _bind(host, port)
    server = uvicorn.Server(_config(agent, settings))
    print(f"console for agent {agent.agent_id!r} on http://{host}:{port}/ (Ctrl-C stops it)")
    with sock:
        asyncio.run(server.serve(sockets=[sock]))


@contextlib.asynccontextmanager
async def running_console(
    agent: AgentClient, settings: ConsoleSettings, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[str]:
    """The console served in this event loop while the block runs; yields its
    URL (port 0: a free port). A taken port is a `CliError`."""
    sock = _bind(host, port)
    server = _EmbeddedServer(_config(agent, settings))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(_START_TIMEOUT):
            while not server.started:
                if task.done():
                    task.result()  # raises what stopped it
                    raise CliError("the console stopped while starting")
                await asyncio.sleep(0.02)
        yield f"http://{host}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sock.close()


async def console_for_stack(
    exits: contextlib.AsyncExitStack,
    agent: AgentClient,
    *,
    ui_url: str,
    namespace: str,
    port: int,
    store_url: str,
) -> str:
    """The console of `fleet-agent up`, stopped with the rest of the stack by
    `exits`; returns its URL. Exports FLEET_DATABASE_URL (the stack's store)
    to this process, since the console reads the store the way the CLI does."""
    os.environ[DATABASE_URL_ENV] = store_url
    settings = ConsoleSettings(ui_url=ui_url, namespace=namespace)
    return await exits.enter_async_context(running_console(agent, settings, port=port))
