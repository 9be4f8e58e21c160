"""The test servers' start survives a server that never listens (tests/servers.py)."""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import pytest
from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.testing import WorkflowEnvironment

from starter.devserver import find_temporal_cli
from tests.servers import started


async def test_a_dev_server_that_cannot_bind_is_started_again_on_a_free_port() -> None:
    # The port is held, as when another process takes the SDK's free port
    # before the server binds it: that server never listens.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        tried: list[int | None] = []

        async def start(attempt: int) -> WorkflowEnvironment:
            tried.append(port if attempt == 1 else None)
            return await WorkflowEnvironment.start_local(
                dev_server_existing_path=find_temporal_cli(),
                dev_server_log_level="error",
                dev_server_startup_timeout=timedelta(seconds=2),
                port=tried[-1],
            )

        began = time.monotonic()
        env = await started(start)
        try:
            assert tried == [port, None]
            assert env.client.service_client.config.target_host != f"127.0.0.1:{port}"
            await env.client.workflow_service.get_system_info(GetSystemInfoRequest())
        finally:
            await env.shutdown()
        assert time.monotonic() - began < 30


async def test_the_last_failure_is_raised() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]

        async def start(attempt: int) -> WorkflowEnvironment:
            return await WorkflowEnvironment.start_local(
                dev_server_existing_path=find_temporal_cli(),
                dev_server_log_level="error",
                dev_server_startup_timeout=timedelta(seconds=1),
                port=port,
            )

        with pytest.raises(RuntimeError, match="did not start within"):
            await started(start, attempts=2)
