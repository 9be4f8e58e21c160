"""The test servers' start survives a server that never listens (testkit/servers.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.testing import WorkflowEnvironment

from starter.stack.devserver import find_temporal_cli
from testkit.servers import STARTUP_TIMEOUT, started

#: Long enough to see a server on a held port fail to listen.
NEVER_LISTENS = timedelta(seconds=1)


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port another process holds, as when one takes the SDK's free port
    before the server binds it: a server started on it never listens."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


async def _dev_server(port: int | None, timeout: timedelta) -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=find_temporal_cli(),
        dev_server_log_level="error",
        dev_server_startup_timeout=timeout,
        port=port,
    )


async def test_a_dev_server_that_cannot_bind_is_started_again_on_a_free_port(
    held_port: int,
) -> None:
    tried: list[int | None] = []

    async def start(attempt: int) -> WorkflowEnvironment:
        # The retry gets the whole start window: on a loaded machine it is
        # the one that must start.
        port, timeout = (held_port, NEVER_LISTENS) if attempt == 1 else (None, STARTUP_TIMEOUT)
        tried.append(port)
        return await _dev_server(port, timeout)

    env = await started(start)
    try:
        assert tried == [held_port, None]
        assert env.client.service_client.config.target_host != f"127.0.0.1:{held_port}"
        await env.client.workflow_service.get_system_info(GetSystemInfoRequest())
    finally:
        await env.shutdown()


async def test_the_last_failure_is_raised(held_port: int) -> None:
    async def start(attempt: int) -> WorkflowEnvironment:
        return await _dev_server(held_port, NEVER_LISTENS)

    with pytest.raises(RuntimeError, match="did not start within"):
        await started(start, attempts=2)
