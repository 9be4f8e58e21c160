"""`ask` and `say --wait` against the real dev server: the answer of the run
that took the message in, and a wait that ends first without losing it.

The CLI runs in-process (as in tests/helpers/cli.py) against a worker on its own
task queue with the autopilot provider, which answers every message with
`author: noted — “text”`. No fleet: the monitor stays off.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.models import TriggerKind
from fleet_agent.store import Store
from starter.cli import main
from starter.identity import os_identity
from tests.helpers import Harness, eventually, finished_runs, running_worker

pytestmark = pytest.mark.devserver


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


@dataclass(frozen=True)
class Stack:
    address: str
    harness: Harness
    store: Store


@pytest_asyncio.fixture(scope="module")
async def stack(
    dev_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    db_url = f"sqlite:///{tmp_path_factory.mktemp('ask') / 'fleet.db'}"
    store = Store(db_url)
    store.create_all()
    async with running_worker(dev_env.client, store, provider=AutopilotProvider()) as harness:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("FLEET_DATABASE_URL", db_url)  # where `ask` reads the answer
            patch.delenv("FLEET_AGENT_ID", raising=False)
            yield Stack(dev_env.client.service_client.config.target_host, harness, store)
    store.dispose()


async def cli(capsys: pytest.CaptureFixture[str], stack: Stack, *argv: str) -> Result:
    capsys.readouterr()
    where = ("--address", stack.address, "--task-queue", stack.harness.task_queue)
    code = await asyncio.to_thread(main, [*argv, *where])
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


async def new_agent(capsys: pytest.CaptureFixture[str], stack: Stack, *options: str) -> str:
    agent = f"ask-{uuid.uuid4().hex[:8]}"
    stack.harness.agent_ids.add(agent)
    started = await cli(
        capsys, stack, "start", "--set", "monitor_enabled=false", *options, "--agent", agent
    )
    assert started.code == 0, started
    return agent


async def test_ask_prints_the_answer_of_the_run_that_took_the_message_in(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = await new_agent(capsys, stack)
    asked = await cli(capsys, stack, "ask", "how is the fleet?", "--agent", agent)
    assert asked.code == 0, asked
    lines = asked.out.strip().splitlines()
    assert lines[0].startswith("run #") and lines[0].endswith(" answered:"), asked.out
    assert f"{os_identity()}: noted — “how is the fleet?”" in asked.out
    assert "<verdict>" not in asked.out
    assert "message sent, waiting up to 300s" in asked.err
    run = int(lines[0].split()[1].removeprefix("#"))
    record = next(r for r in finished_runs(stack.store, agent) if r.run == run)
    assert [t.text for t in record.triggers if t.kind == TriggerKind.HUMAN_MESSAGE] == [
        "how is the fleet?"
    ]

    # say --wait is the same; --json gives the answer as data.
    waited = await cli(capsys, stack, "say", "and now?", "--wait", "--json", "--agent-id", agent)
    assert waited.code == 0, waited
    answer = json.loads(waited.out)
    assert answer["run"] > run and answer["status"] == "ok" and answer["finished"] is True
    assert f"{os_identity()}: noted — “and now?”" in answer["text"]
    assert answer["message_id"].startswith("m-") and answer["agent_id"] == agent


async def test_a_wait_that_ends_first_exits_124_and_the_message_is_kept(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = await new_agent(capsys, stack, "--paused")
    waited = await cli(capsys, stack, "ask", "are you there?", "--timeout", "1", "--agent", agent)
    assert waited.code == 124, waited
    last = waited.err.strip().splitlines()[-1]
    assert last.startswith("fleet-agent: error: no answer within 1s"), last
    assert "not lost" in last and "next run" in last
    assert f".venv/bin/fleet-agent runs --agent {agent}" in last

    # Unpaused, the agent answers it in its next run.
    assert (await cli(capsys, stack, "config", "--set", "paused=false", "--agent", agent)).code == 0

    async def answered() -> bool:
        return any(
            t.text == "are you there?" and r.final_text
            for r in finished_runs(stack.store, agent)
            for t in r.triggers
        )

    await eventually(answered, timeout=30, what="the kept message to be answered")


async def test_ask_needs_the_run_log(
    stack: Stack,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a store to read the answer from, nothing is sent."""
    agent = await new_agent(capsys, stack, "--paused")
    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{tmp_path / 'absent.db'}")
    result = await cli(capsys, stack, "ask", "lost?", "--agent", agent)
    assert result.code == 1, result
    assert "no run log at" in result.err
    status = await cli(capsys, stack, "status", "--json", "--agent", agent)
    pending = json.loads(status.out)["pending_triggers"]
    assert [t for t in pending if t["kind"] == "human_message"] == []
