"""A run closes its record with a local activity (issue 10): no activity task
through the server and no workflow task after it, the record written all
the same, the Web UI's summary kept on the marker."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import make_url, text
from sqlalchemy.exc import ProgrammingError
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import AgentInput, ConfigPatch, RunStatus
from fleet_agent.store import RunRecord, Store
from fleet_agent.store.engine import create_engine_for
from tests.conftest import postgres_url
from tests.fakes.anthropic_server import FakeAnthropic, Reply
from tests.helpers import (
    WorkerProcess,
    eventually,
    running_worker,
    wait_runs,
    worker_process_env,
)
from tests.store_backends import require_postgres
from workflows import FleetAgentWorkflow
from workflows.policies import TASK_QUEUE
from workflows.run_record import RECORD_LOCALLY_PATCH

ANSWER = 'On target.\n<verdict>{"action": false, "state_changed": false}</verdict>'


async def test_the_run_records_itself_locally_and_ends_in_that_task(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=ANSWER))
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        await handle.signal(FleetAgentWorkflow.human_message, {"text": "status?"})
        runs = await wait_runs(store, handle.id, 1)
        assert runs[0].status == RunStatus.OK and runs[0].final_text.startswith("On target.")
        run = ts_env.client.get_workflow_handle(f"{handle.id}/run-1")
        await run.result()
        history = await run.fetch_history()
    kinds = Counter(EventType.Name(e.event_type) for e in history.events)
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    # load_context and the model's round go through the server; the record does not.
    assert scheduled == ["load_context", "call_llm"], scheduled
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
    assert any(RECORD_LOCALLY_PATCH.encode() in e.SerializeToString() for e in markers)
    local = [e for e in markers if b"record_run" in e.SerializeToString()]
    assert len(local) == 1, markers
    summary = pydantic_data_converter.payload_converter.from_payload(
        local[0].user_metadata.summary, str
    )
    assert summary == "record run 1 (ok)"
    # Start, after load_context, after the model: the third task records and ends.
    assert kinds["EVENT_TYPE_WORKFLOW_TASK_COMPLETED"] == 3, kinds
    last = history.events[-1]
    assert last.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED


@pytest.mark.devserver
@pytest.mark.postgres
async def test_a_worker_killed_while_the_run_records_itself_leaves_one_closed_record(
    dev_env: WorkflowEnvironment, fake_llm: FakeAnthropic, tmp_path: Path
) -> None:
    """The local activity's retry path, done for real: the run table is
    locked (PostgreSQL, `LOCK TABLE fa_runs`: the model's reply goes to
    another table) so `record_run` blocks inside the workflow task that runs
    it, the worker process is SIGKILLed there, a new one starts, and the run
    ends with its record closed once."""
    require_postgres()
    schema = f"fa_test_{uuid.uuid4().hex}"
    admin = create_engine_for(postgres_url())
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = make_url(postgres_url()).set(query={"options": f"-csearch_path={schema}"})
    db_url = url.render_as_string(hide_password=False)
    env = worker_process_env(dev_env, db_url, FLEET_NEW_STORE="1", FLEET_LLM_PROVIDER="anthropic")
    env |= fake_llm.env()
    # A slow model: the table is locked while the run waits for it.
    fake_llm.set_responder(
        lambda req: Reply(text=ANSWER, delay=3.0 if "hold on" in req.last_user_text() else 0)
    )
    agent_id = f"record-kill-{uuid.uuid4().hex[:6]}"
    locker = create_engine_for(db_url)
    lock = None
    with (tmp_path / "workers.log").open("ab") as log:
        first = WorkerProcess(env, log)
        second: WorkerProcess | None = None
        try:
            handle = await dev_env.client.start_workflow(
                FleetAgentWorkflow.run,
                AgentInput(config=ConfigPatch(monitor_enabled=False)),
                id=agent_id,
                task_queue=TASK_QUEUE,
            )
            # The start-up run first, so the run that takes the message is the next.
            await eventually(lambda: _closed(db_url, agent_id, 1), timeout=60, what="run 1")
            await handle.signal(FleetAgentWorkflow.human_message, {"text": "hold on"})
            # load_context opens the run's record (its only write to fa_runs
            # before the record is closed): then the table is locked, which
            # leaves reads and the model's reply (fa_messages) alone.
            await eventually(lambda: _opened(db_url, agent_id, 2), timeout=60, what="run 2 open")
            lock = locker.connect()
            tx = lock.begin()
            lock.execute(text("LOCK TABLE fa_runs IN EXCLUSIVE MODE"))
            run = dev_env.client.get_workflow_handle(f"{agent_id}/run-2")
            await eventually(lambda: _llm_done(run), timeout=60, what="the model's round")
            await asyncio.sleep(1.0)  # the record's local activity now waits on the lock
            assert (await run.describe()).status == WorkflowExecutionStatus.RUNNING
            first.kill()
            tx.rollback()
            second = WorkerProcess(env, log)
            await asyncio.wait_for(run.result(), timeout=90)
            history = await run.fetch_history()
            local = [
                e
                for e in history.events
                if e.HasField("marker_recorded_event_attributes")
                and b"record_run" in e.SerializeToString()
            ]
            assert len(local) == 1
            store = Store(db_url)
            try:
                records = [r for r in store.list_runs(agent_id) if r.run == 2]
                assert [r.status for r in records] == [RunStatus.OK], records
                assert records[0].final_text.startswith("On target.")
            finally:
                store.dispose()
        finally:
            if lock is not None:
                lock.close()
            locker.dispose()
            with contextlib.suppress(Exception):
                await dev_env.client.get_workflow_handle(agent_id).terminate("test finished")
            first.kill()
            if second is not None:
                second.kill()
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()


def _records(db_url: str, agent_id: str, run: int) -> list[RunRecord]:
    """The run's attempts; none while the worker has not made the store yet."""
    store = Store(db_url)
    try:
        return [r for r in store.list_runs(agent_id) if r.run == run]
    except ProgrammingError:  # no fa_runs table yet
        return []
    finally:
        store.dispose()


async def _closed(db_url: str, agent_id: str, run: int) -> bool:
    records = await asyncio.to_thread(_records, db_url, agent_id, run)
    return any(r.status != RunStatus.RUNNING for r in records)


async def _opened(db_url: str, agent_id: str, run: int) -> bool:
    return bool(await asyncio.to_thread(_records, db_url, agent_id, run))


async def _llm_done(run: WorkflowHandle[Any, Any]) -> bool:
    """Whether the run's call_llm activity has completed."""
    events = (await run.fetch_history()).events
    llm = {
        e.event_id
        for e in events
        if e.activity_task_scheduled_event_attributes.activity_type.name == "call_llm"
    }
    return any(
        e.activity_task_completed_event_attributes.scheduled_event_id in llm
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    )
