"""Fixtures only the agent's tests use (tests/conftest.py holds the shared ones)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from starter.stack.devserver import load_dev_config
from testkit.servers import start_dev_env


@pytest_asyncio.fixture(scope="module")
async def plain_dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server with temporal-dev.yaml's settings only, as `make run` has
    them: the agent continues as new by its own thresholds, not every few runs."""
    config = load_dev_config()
    env = await start_dev_env(config.dynamic_config_args())
    yield env
    await env.shutdown()
