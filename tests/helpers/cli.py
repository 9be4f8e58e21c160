"""The `fleet-agent` CLI against the real Temporal dev server: what the tests of
the CLI share.

Agent commands run in-process (`starter.cli.main(argv)` in a thread, as the
console script would, with its own event loop and client) against a worker on
the test module's own task queue (`stack`): the autopilot provider and the
vast.ai simulator, so the whole loop, monitor included, is the product's. No
fixed sleeps: the store and the status query are polled with deadlines.
Import the fixtures into a test module.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import pytest
import pytest_asyncio
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.config.settings import ProverSpec, Settings
from fleet_agent.store import RunRecord, Store
from simulator import DEFAULT_API_KEY, SimServer
from starter.cli import main
from testkit.sim_helpers import SIM_RAM_GIB
from tests.helpers import Harness, eventually, finished_runs, running_worker
from worker import fleet_from_settings

CONTRACT_KEYS = {
    "agent_id",
    "session",
    "run_count",
    "phase",
    "current_run",
    "pending_triggers",
    "next_heartbeat_at",
    "wakes",
    "last_run",
    "config",
}


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Stack:
    """The module's worker: where to reach it and where it writes the run log."""

    address: str
    harness: Harness
    store: Store
    db_url: str


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    # speed 0: the simulated market stands still, so runs are reproducible.
    with SimServer(seed=7, speed=0, scenario="ideal", offers=500, rate_limits=False) as server:
        yield server


@pytest_asyncio.fixture(scope="module")
async def stack(
    dev_env: WorkflowEnvironment, sim: SimServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    db_url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'fleet.db'}"
    store = Store(db_url)
    store.create_all()
    fleet = fleet_from_settings(
        Settings(
            vast_api_url=sim.url,
            vast_api_key=SecretStr(DEFAULT_API_KEY),
            prover=ProverSpec(
                mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB
            ),
        ),
        store,
    )
    async with running_worker(
        dev_env.client, store, provider=AutopilotProvider(), fleet=fleet
    ) as harness:
        yield Stack(dev_env.client.service_client.config.target_host, harness, store, db_url)
        # Agents first, then their monitors (abandoned children that outlive them).
        await harness.terminate_all()
        for agent_id in harness.agent_ids:
            with contextlib.suppress(Exception):
                await dev_env.client.get_workflow_handle(f"{agent_id}/monitor").terminate("done")
    store.dispose()


@pytest.fixture
def env(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Stack:
    """The CLI reads the run log where the worker writes it."""
    monkeypatch.setenv("FLEET_DATABASE_URL", stack.db_url)
    monkeypatch.delenv("FLEET_AGENT_ID", raising=False)
    return stack


def new_agent(stack: Stack) -> str:
    agent_id = f"cli-{uuid.uuid4().hex[:8]}"
    stack.harness.agent_ids.add(agent_id)  # terminated when the worker stops
    return agent_id


async def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    """Run the CLI in a thread (it owns an event loop) and capture what it printed."""
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


async def agent_cli(capsys: pytest.CaptureFixture[str], stack: Stack, *argv: str) -> Result:
    """An agent command aimed at the test server and the module's task queue."""
    return await cli(
        capsys, *argv, "--address", stack.address, "--task-queue", stack.harness.task_queue
    )


def assert_one_line_error(result: Result, *fragments: str, code: int = 1) -> None:
    assert result.code == code, result
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleet-agent: error: "), result.err
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in result.err


async def wait_run(store: Store, agent_id: str, run: int) -> RunRecord:
    async def probe() -> RunRecord | None:
        return next((r for r in finished_runs(store, agent_id) if r.run == run), None)

    found = await eventually(probe, timeout=20, what=f"run {run} of {agent_id}")
    assert found is not None
    return found


def row_of(table: str, run: int) -> str:
    return next(line for line in table.splitlines() if line.startswith(f"#{run} "))
