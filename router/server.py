"""Run the router: its gRPC server on a listen address, and its member source.

`start_server` binds a grpc.aio server with the router's servicer (Curio's
256 MiB message limits; port 0 picks one) and returns it with its port;
`serve` starts the router, the server and a membership source and runs
until cancelled, then stops all three. Plaintext: Curio's client dials
cuzk without TLS (curio ``lib/cuzk/client.go``), so the router listens on
the operator's own host (``127.0.0.1:9820`` by default).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import grpc.aio

from fleet_agent.cuzk.service import add_raw_input_servicer, channel_options

from .engine import Router
from .membership import MembershipSource
from .service import RouterService

__all__ = ["DEFAULT_LISTEN", "serve", "start_server"]

#: Where Curio's ``[Cuzk] Address`` points by default (cuzk's own port).
DEFAULT_LISTEN = "127.0.0.1:9820"


async def start_server(listen: str, router: Router) -> tuple[grpc.aio.Server, int]:
    """A started server answering for `router` on `listen`, and its port."""
    server = grpc.aio.server(options=channel_options())
    add_raw_input_servicer(server, RouterService(router))
    port = server.add_insecure_port(listen)
    await server.start()
    return server, port


async def serve(
    listen: str,
    router: Router,
    members: MembershipSource | None = None,
    *,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve `router` on `listen` with `members` feeding it, until cancelled."""
    await router.start()
    server, port = await start_server(listen, router)
    source = asyncio.create_task(members.run(router)) if members is not None else None
    if on_ready is not None:
        on_ready(port)
    try:
        await server.wait_for_termination()
    finally:
        if source is not None:
            source.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await source
        await server.stop(grace=1.0)
        await router.close()
