"""A worker whose store vanished refuses to start while agents run, until told otherwise.

Real worker processes (`python worker.py`, `fleet-agent worker`) against the
real dev server; an agent is started on the worker's task queue and left
without a worker (paused, no monitor), so it simply stays Running.
`fleet-agent up` is covered in test_cli_up.py.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from sqlalchemy import text
from sqlalchemy.engine import make_url
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import AgentInput, ConfigPatch
from fleet_agent.store import SCHEMA_VERSION, Store, create_engine_for
from starter.cli import main
from tests.conftest import postgres_url
from tests.helpers import eventually, worker_process_env
from tests.helpers.store_backends import require_postgres
from worker import running_agents
from workflows import FleetAgentWorkflow
from workflows.policies import TASK_QUEUE

pytestmark = pytest.mark.devserver

ROOT = Path(__file__).resolve().parents[2]
WORKER = [sys.executable, str(ROOT / "worker.py")]
CLI_WORKER = [sys.executable, "-c", "from starter.cli import main; main()", "worker"]


@pytest_asyncio.fixture
async def agent(dev_env: WorkflowEnvironment) -> AsyncIterator[str]:
    """A running agent on the default task queue, as a deployment's worker serves it."""
    client = dev_env.client
    agent_id = f"store-guard-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(
        FleetAgentWorkflow.run,
        AgentInput(config=ConfigPatch(paused=True, monitor_enabled=False)),
        id=agent_id,
        task_queue=TASK_QUEUE,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
    )

    async def listed() -> bool:
        return agent_id in await running_agents(client)

    await eventually(listed, timeout=20, what=f"{agent_id} in visibility")
    try:
        yield agent_id
    finally:
        await client.get_workflow_handle(agent_id).terminate("test finished")


async def _run_to_exit(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode is not None
    return proc.returncode, err.decode()


async def test_python_worker_refuses_a_missing_sqlite_store(
    dev_env: WorkflowEnvironment, agent: str, tmp_path: Path
) -> None:
    db = tmp_path / "fleet.db"
    code, err = await _run_to_exit(WORKER, worker_process_env(dev_env, f"sqlite:///{db}"))
    assert code == 1, err
    assert err.startswith("worker: error: the store at "), err
    assert str(db) in err and "does not exist" in err
    assert repr(agent) in err and "--new-store" in err and "FLEET_NEW_STORE=1" in err
    assert "Traceback" not in err
    assert not db.exists(), "the refused worker created the store anyway"


async def test_python_worker_refuses_an_empty_postgres_store_without_showing_its_password(
    dev_env: WorkflowEnvironment, agent: str
) -> None:
    require_postgres()
    schema = f"fa_test_{uuid.uuid4().hex}"
    admin = create_engine_for(postgres_url())
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        # Trust auth ignores the password; it must not appear in any message.
        url = (
            make_url(postgres_url())
            .set(password="s3cret-pw", query={"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
        code, err = await _run_to_exit(WORKER, worker_process_env(dev_env, url))
        assert code == 1, err
        assert "has no fleet-agent tables" in err and repr(agent) in err
        assert "***" in err and "s3cret-pw" not in err
        with admin.connect() as conn:
            tables = conn.execute(
                text("SELECT count(*) FROM information_schema.tables WHERE table_schema = :s"),
                {"s": schema},
            ).scalar_one()
        assert tables == 0
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


async def test_fleet_agent_worker_refuses_in_one_line(
    dev_env: WorkflowEnvironment,
    agent: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "fleet.db"
    address = dev_env.client.service_client.config.target_host
    for key, value in worker_process_env(dev_env, f"sqlite:///{db}").items():
        monkeypatch.setenv(key, value)  # restored after the test: `worker` exports some
    monkeypatch.delenv("FLEET_NEW_STORE", raising=False)

    code = await asyncio.to_thread(main, ["worker", "--address", address])

    err = capsys.readouterr().err
    assert code == 1, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("fleet-agent: error: the store at "), err
    assert repr(agent) in lines[-1] and "--new-store" in lines[-1]
    assert not db.exists()


@pytest.mark.parametrize(
    ("argv", "extra_env"),
    [([*WORKER, "--new-store"], {}), (CLI_WORKER, {"FLEET_NEW_STORE": "1"})],
    ids=["python-worker-flag", "fleet-agent-worker-env"],
)
async def test_the_new_store_switch_creates_an_empty_store(
    dev_env: WorkflowEnvironment,
    agent: str,
    tmp_path: Path,
    argv: list[str],
    extra_env: dict[str, str],
) -> None:
    db = tmp_path / "fleet.db"
    proc = await asyncio.create_subprocess_exec(
        *argv,
        env=worker_process_env(dev_env, f"sqlite:///{db}", **extra_env),
        cwd=ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        store = Store(f"sqlite:///{db}")
        try:

            async def created() -> bool:
                if proc.returncode is not None:
                    raise AssertionError(f"the worker exited with {proc.returncode}")
                return db.exists() and store.condition().version == SCHEMA_VERSION

            await eventually(created, timeout=30, what="the worker to create its store")
        finally:
            store.dispose()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), timeout=30)
    text_err = err.decode()
    assert "creating a new, empty store" in text_err and "agent(s) are running" in text_err
    assert "worker on task queue" in text_err, text_err[-2000:]


async def test_an_unreachable_store_stops_the_worker_with_one_line(
    dev_env: WorkflowEnvironment,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = make_url(postgres_url()).set(host="127.0.0.1", port=port, password="s3cret-pw")
    code, err = await _run_to_exit(WORKER, worker_process_env(dev_env, url.render_as_string(False)))
    assert code == 1, err
    assert err.startswith("worker: error: cannot open the store at postgresql+psycopg://"), err
    assert f"127.0.0.1:{port}" in err and "s3cret-pw" not in err
    assert "Traceback" not in err
