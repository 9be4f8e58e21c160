"""Serve the console with uvicorn: alone until interrupted (`serve`, the
`console` command), or inside another program's event loop
(`running_console`, for `fleet-agent up` and the tests). Binds a TCP port.

Bound to anything but loopback, the console never serves without tokens
(starter/console/auth.py): `serve` generates one and prints it once to the
terminal, or refuses to start when no terminal would see it;
`running_console` refuses. Nor without TLS (starter/console/tls.py), unless
told `insecure_http`: the token would cross the network in the clear."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from typing import TextIO

import uvicorn

from fleet_agent.store.engine import DATABASE_URL_ENV
from starter.agent_client import AgentClient, CliError
from starter.console.app import create_app
from starter.console.auth import DEFAULT_TOKEN_NAME, TOKEN_ENV, is_loopback, new_token, parse_tokens
from starter.console.tls import TLS_CERT_ENV, TLS_KEY_ENV, ConsoleTls, check_transport, console_tls
from starter.console.web import ALLOWED_HOSTS_ENV, LOOPBACK_HOSTS, ConsoleSettings

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


def _config(
    agent: AgentClient, settings: ConsoleSettings, tls: ConsoleTls | None
) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(agent, settings),
        log_level="warning",
        access_log=False,
        # Our own context (starter/console/tls.py): loaded and checked before
        # the port is bound, and it never prompts for a key's passphrase.
        ssl_context_factory=(lambda _config, _default: tls.context) if tls else None,
    )


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _scheme(tls: ConsoleTls | None) -> str:
    return "https" if tls else "http"


def with_token(
    settings: ConsoleSettings, host: str, terminal: TextIO
) -> tuple[ConsoleSettings, str | None]:
    """`settings` for a console bound to `host`, and the token generated for
    it if one was. Loopback, or tokens already set: unchanged. Otherwise a
    fresh token named ``console``, but only when `terminal` is one (the token
    is shown there once and must not land in a log file): else a `CliError`."""
    if settings.tokens or is_loopback(host):
        return settings, None
    if not terminal.isatty():
        raise CliError(
            f"the console bound to {host} needs a token: set {TOKEN_ENV} "
            "(name:token,name2:token2, or one token), or start it in a terminal, "
            "which shows a generated one"
        )
    token = new_token()
    return dataclasses.replace(settings, tokens=((DEFAULT_TOKEN_NAME, token),)), token


def serve(
    agent: AgentClient,
    settings: ConsoleSettings,
    host: str,
    port: int,
    *,
    tls: ConsoleTls | None = None,
    insecure_http: bool = False,
) -> None:
    """Run the console on host:port until Ctrl-C (blocks), over https with
    `tls`. A non-loopback bind without `tls` is a `UsageError` unless
    `insecure_http`; a taken port is a `CliError`, and so is a non-loopback
    bind without a token or a terminal."""
    check_transport(host, tls, insecure_http)
    settings, token = with_token(settings, host, sys.stdout)
    sock = _bind(host, port)
    server = uvicorn.Server(_config(agent, settings, tls))
    scheme = _scheme(tls)
    print(
        f"console for agent {agent.agent_id!r} on {scheme}://{_url_host(host)}:{port}/ "
        "(Ctrl-C stops it)"
    )
    if token is not None:
        # Shown once, here only: never logged, stored or sent to the agent.
        # The bound address, or a CONSOLE_ALLOWED_HOSTS name: a Host it answers.
        names = [h for h in settings.allowed_hosts if h not in LOOPBACK_HOSTS]
        hint = "" if names else f" (other machines: by a name in {ALLOWED_HOSTS_ENV})"
        print(
            f"it needs a token ({TOKEN_ENV} is not set); this one lasts until it stops:\n"
            f"  {scheme}://{(names or ['127.0.0.1'])[0]}:{port}/?token={token}{hint}\n"
            f"  (open it once in a browser, or send 'Authorization: Bearer {token}')",
            flush=True,
        )
    with sock:
        asyncio.run(server.serve(sockets=[sock]))


@contextlib.asynccontextmanager
async def running_console(
    agent: AgentClient,
    settings: ConsoleSettings,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    tls: ConsoleTls | None = None,
    insecure_http: bool = False,
) -> AsyncIterator[str]:
    """The console served in this event loop while the block runs, over https
    with `tls`; yields its URL (port 0: a free port). A taken port is a
    `CliError`, and so is a non-loopback `host` without tokens in `settings`;
    one without `tls` is a `UsageError` unless `insecure_http`."""
    check_transport(host, tls, insecure_http)
    if not (settings.tokens or is_loopback(host)):
        raise CliError(f"the console bound to {host} needs a token: set {TOKEN_ENV}")
    sock = _bind(host, port)
    server = _EmbeddedServer(_config(agent, settings, tls))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(_START_TIMEOUT):
            while not server.started:
                if task.done():
                    task.result()  # raises what stopped it
                    raise CliError("the console stopped while starting")
                await asyncio.sleep(0.02)
        yield f"{_scheme(tls)}://{_url_host(host)}:{sock.getsockname()[1]}"
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
    to this process, since the console reads the store the way the CLI does.
    Loopback only; ``CONSOLE_TOKEN``, if set, is required all the same, and
    with ``CONSOLE_TLS_CERT`` and ``CONSOLE_TLS_KEY`` it serves https."""
    os.environ[DATABASE_URL_ENV] = store_url
    tokens = parse_tokens(os.environ.get(TOKEN_ENV))
    tls = console_tls(os.environ.get(TLS_CERT_ENV), os.environ.get(TLS_KEY_ENV))
    settings = ConsoleSettings(ui_url=ui_url, namespace=namespace, tokens=tokens)
    return await exits.enter_async_context(running_console(agent, settings, port=port, tls=tls))
