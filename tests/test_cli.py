"""The `fleet-agent` CLI against the real Temporal dev server.

Agent commands run in-process (`starter.cli.main(argv)` in a thread, as the
console script would, with its own event loop and client) against a worker on
the test's own task queue: the autopilot provider and the vast.ai simulator, so
the whole loop, monitor included, is the product's. `up` runs as a subprocess
with its own dev server on free ports. No fixed sleeps: the store and the
status query are polled with deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.config.settings import ProverSpec, Settings
from fleet_agent.llm.base import LlmOptions, LlmReply, ProgressCallback, SystemPrompt
from fleet_agent.models import TokenUsage, TriggerKind
from fleet_agent.store import RunRecord, Store
from simulator import DEFAULT_API_KEY, SimServer
from starter.agent_client import DEFAULT_CONNECT_TIMEOUT
from starter.cli import main
from starter.identity import os_identity
from tests.helpers import Harness, eventually, finished_runs, running_worker
from tests.ports import free_port
from worker import fleet_from_settings

pytestmark = pytest.mark.devserver

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
            prover=ProverSpec(allow_loopback=True),
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


# ---------------------------------------------------------------- agent commands


async def test_say_starts_the_agent_and_the_run_log_shows_it(
    env: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = new_agent(env)
    before = await agent_cli(capsys, env, "status", "--agent-id", agent)
    assert_one_line_error(before, f"agent {agent!r} is not running")

    said = await agent_cli(capsys, env, "say", "hello from the cli", "--agent-id", agent)
    assert said.code == 0, said
    assert "was not running: started it" in said.out

    first = await wait_run(env.store, agent, 1)
    messages = [t for t in first.triggers if t.kind == TriggerKind.HUMAN_MESSAGE]
    # The author is who ran the CLI, never text given to it (issue 42).
    assert [(m.text, m.author) for m in messages] == [("hello from the cli", os_identity())]
    # One sender for `say` and `ask`: the message has an id to find its answer by.
    assert [m.message_id[:2] for m in messages] == ["m-"], messages
    assert first.in_prompt

    # A trigger with nothing to say gives a no-op run, which is left out of the prompt.
    poked = await agent_cli(capsys, env, "trigger", "--reason", "look", "--agent-id", agent)
    assert poked.code == 0 and "is running; run requested" in poked.out, poked
    second = await wait_run(env.store, agent, 2)
    assert second.noop and not second.in_prompt

    runs = await cli(capsys, "runs", "--agent-id", agent)
    assert runs.code == 0, runs
    assert "[skipped in prompt]" in row_of(runs.out, 2)
    assert "[no-op]" in row_of(runs.out, 2)
    assert "skipped in prompt" not in row_of(runs.out, 1)
    assert "human_message" in row_of(runs.out, 1)

    as_json = await cli(capsys, "runs", "--agent-id", agent, "--json")
    assert [(r["run"], r["in_prompt"]) for r in json.loads(as_json.out)] == [(1, True), (2, False)]
    one_session = await cli(capsys, "runs", "--agent-id", agent, "--session", "1")
    assert one_session.code == 0, one_session
    assert "session 1: 2 run(s) · cost $" in one_session.out

    shown = await cli(capsys, "show-run", "1", "--agent-id", agent)
    assert shown.code == 0, shown
    assert "── #0 round 0 · user · context" in shown.out
    assert f"Message from {os_identity()}" in shown.out and "hello from the cli" in shown.out
    assert "· assistant · assistant" in shown.out and "<verdict>" in shown.out

    missing = await cli(capsys, "show-run", "99", "--agent-id", agent)
    assert_one_line_error(missing, "no run 99")


async def test_start_twice_attaches_and_status_json_keeps_the_contract(
    env: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = new_agent(env)
    first = await agent_cli(capsys, env, "start", "--paused", "--target", "7", "--agent-id", agent)
    assert first.code == 0 and f"started agent {agent!r}" in first.out, first
    again = await agent_cli(capsys, env, "start", "--target", "9", "--agent-id", agent)
    assert again.code == 0, again
    assert "already running: attached" in again.out
    assert "not applied" in again.out

    result = await agent_cli(capsys, env, "status", "--json", "--agent-id", agent)
    assert result.code == 0, result
    st = json.loads(result.out)
    assert st.keys() >= CONTRACT_KEYS
    assert st["agent_id"] == agent
    assert st["phase"] in {"idle", "debouncing", "running", "paused"}
    assert st["run_count"] == 0 and st["current_run"] is None and st["last_run"] is None
    assert st["config"]["paused"] is True
    assert st["config"]["target_proofs_per_hour"] == 7  # the second start changed nothing

    async def paused_text() -> str:
        # The phase turns `paused` once the agent's start-up activity is done.
        text = await agent_cli(capsys, env, "status", "--agent-id", agent)
        return text.out if "phase:          paused" in text.out else ""

    out = await eventually(paused_text, timeout=10, what="phase paused in `status`")
    assert f"agent {agent}" in out and "7 proofs/h" in out and "last run:       none yet" in out


async def test_config_shows_server_validation_and_applies_good_values(
    env: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = new_agent(env)
    assert (await agent_cli(capsys, env, "start", "--paused", "--agent-id", agent)).code == 0

    bad = await agent_cli(
        capsys, env, "config", "--set", "heartbeat_seconds=5", "--agent-id", agent
    )
    # Checked as the workflow's validator checks it, before asking: a usage error.
    assert_one_line_error(
        bad, "invalid config", "heartbeat_seconds", "greater than or equal to 30", code=2
    )
    unknown = await agent_cli(capsys, env, "config", "--set", "nonsense=1", "--agent-id", agent)
    assert_one_line_error(unknown, "nonsense", code=2)
    garbage = await agent_cli(capsys, env, "config", "--set", "garbage", "--agent-id", agent)
    assert_one_line_error(garbage, "expected key=value, got 'garbage'", code=2)

    good = await agent_cli(
        capsys, env, "config", "--set", "target_proofs_per_hour=500", "--agent-id", agent
    )
    assert good.code == 0, good
    assert any(
        line.split() == ["target_proofs_per_hour", "500.0"] for line in good.out.splitlines()
    )

    gpus = await agent_cli(
        capsys, env, "config", "--set", "allowed_gpus=A100, H100", "--json", "--agent-id", agent
    )
    assert json.loads(gpus.out)["allowed_gpus"] == ["A100", "H100"]

    shown = await agent_cli(capsys, env, "config", "--json", "--agent-id", agent)
    config = json.loads(shown.out)
    assert config["target_proofs_per_hour"] == 500 and config["heartbeat_seconds"] == 300


async def test_unknown_wake_and_stopped_agent_fail_clearly(
    env: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = new_agent(env)
    assert (await agent_cli(capsys, env, "start", "--paused", "--agent-id", agent)).code == 0
    nope = await agent_cli(capsys, env, "cancel-wake", "nope", "--agent-id", agent)
    assert_one_line_error(nope, "no pending wake 'nope'", "pending: none")
    wakes = await agent_cli(capsys, env, "wakes", "--agent-id", agent)
    assert wakes.code == 0 and wakes.out.strip() == "no pending wakes"

    await env.harness.client.get_workflow_handle(agent).terminate("test")
    stopped = await agent_cli(capsys, env, "reset", "--agent-id", agent)
    assert_one_line_error(stopped, "not running", "TERMINATED")


async def test_no_worker_means_a_clear_timeout_not_a_hang(
    env: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = new_agent(env)
    queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"
    where = ("--address", env.address, "--task-queue", queue, "--agent-id", agent)
    assert (await cli(capsys, "start", "--paused", *where)).code == 0
    for argv in (["status"], ["config", "--set", "target_proofs_per_hour=1"]):
        result = await cli(capsys, *argv, "--timeout", "1", *where)
        assert_one_line_error(result, "within 1s; is a worker running", f"task queue {queue!r}")


class _WakeAsker:
    """Asks for one wake in its first round, then ends the run."""

    name = "wake-asker"

    async def complete(
        self,
        *,
        system: SystemPrompt,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        max_tokens: int,
        on_progress: ProgressCallback | None = None,
        options: LlmOptions | None = None,
    ) -> LlmReply:
        last = messages[-1]["content"]
        if not any(b.get("type") == "tool_result" for b in last if isinstance(b, dict)):
            # the context (a text, or a text block marked for the cache): first round
            content = [
                {
                    "type": "tool_use",
                    "id": "toolu_wake",
                    "name": "schedule_next_check",
                    "input": {"delay_seconds": 900, "reason": "look at the boot"},
                }
            ]
            return LlmReply(content=content, stop_reason="tool_use", model="test")
        final = 'Later.\n<verdict>{"action": true, "state_changed": false}</verdict>'
        return LlmReply(
            content=[{"type": "text", "text": final}],
            stop_reason="end_turn",
            usage=TokenUsage(input_tokens=1, output_tokens=1),
            model="test",
        )


async def test_wakes_table_and_cancel_wake(
    dev_env: WorkflowEnvironment, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'wakes.db'}")
    store.create_all()
    async with running_worker(dev_env.client, store, provider=_WakeAsker()) as h:
        stack = Stack(dev_env.client.service_client.config.target_host, h, store, "")
        agent = new_agent(stack)
        # No fleet on this worker: the monitor stays off.
        started = await agent_cli(
            capsys, stack, "start", "--set", "monitor_enabled=false", "--agent-id", agent
        )
        assert started.code == 0, started
        assert (await agent_cli(capsys, stack, "trigger", "--agent-id", agent)).code == 0
        await wait_run(store, agent, 1)

        async def has_wake() -> Result | None:
            listed = await agent_cli(capsys, stack, "wakes", "--agent-id", agent)
            return listed if "w1-1" in listed.out else None

        listed = await eventually(has_wake, timeout=10, what="the wake in `wakes`")
        assert listed is not None
        header, row = listed.out.strip().splitlines()
        assert header.split()[:3] == ["ID", "DUE", "IN"]
        assert row.startswith("w1-1") and "look at the boot" in row and row.endswith("#1")
        assert "in 14m" in row or "in 15m" in row

        cancelled = await agent_cli(capsys, stack, "cancel-wake", "w1-1", "--agent-id", agent)
        assert cancelled.code == 0 and "cancelled wake w1-1" in cancelled.out, cancelled

        async def gone() -> bool:
            st = await agent_cli(capsys, stack, "status", "--json", "--agent-id", agent)
            return not json.loads(st.out)["wakes"]

        await eventually(gone, timeout=10, what="the wake to be cancelled")
    store.dispose()


async def test_unreachable_temporal_is_one_line_and_quick(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One line whatever the failure; a refusal is told at once, and a server
    that never answers is given up on at --connect-timeout (the message
    says which timeout ended it: 1 s, not the default 10 s)."""

    async def status_at(address: str) -> Result:
        return await cli(
            capsys, "status", "--address", address, "--connect-timeout", "1", "--agent-id", "x"
        )

    refused = await status_at("127.0.0.1:1")
    assert_one_line_error(refused, "cannot reach Temporal at 127.0.0.1:1")
    assert "no answer within" not in refused.err, "a refusal is not waited out"
    # Not routed on most networks (it hangs); some sandboxes answer it.
    assert_one_line_error(await status_at("10.255.255.1:7233"), "cannot reach Temporal at")
    with socket.socket() as silent:
        # Connections complete in the kernel's backlog; nothing ever answers.
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        quiet = f"127.0.0.1:{silent.getsockname()[1]}"
        began = asyncio.get_running_loop().time()
        waited = await status_at(quiet)
        took = asyncio.get_running_loop().time() - began
    assert_one_line_error(waited, f"cannot reach Temporal at {quiet}: no answer within 1s")
    # Against the timeout it would have had without the option, 9 s above
    # the one asked for: a loaded machine is never that slow.
    assert 1 <= took < DEFAULT_CONNECT_TIMEOUT, took


def test_usage_and_local_errors_exit_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["cancel-wake"])
    assert usage.value.code == 2
    capsys.readouterr()

    # Usage errors found by the CLI itself exit 2 as argparse's do, before any connection.
    assert main(["say", "   ", "--address", "127.0.0.1:1"]) == 2
    assert "text must not be blank" in capsys.readouterr().err

    assert main(["start", "--set", "paused", "--address", "127.0.0.1:1"]) == 2
    assert "expected key=value" in capsys.readouterr().err

    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{tmp_path / 'absent.db'}")
    assert main(["runs"]) == 1
    assert "no run log at" in capsys.readouterr().err
    assert not (tmp_path / "absent.db").exists()


# ---------------------------------------------------------------- fleet-agent up


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def up_command(tmp_path: Path, *extra: str) -> tuple[list[str], dict[str, str], int]:
    """`fleet-agent up` as the console script runs it, on free ports, autopilot, temp files."""
    port, ui_port = free_port(), free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"ANTHROPIC_API_KEY", "FLEET_LLM_PROVIDER", "VAST_API_KEY", "VAST_API_URL"}
    }
    env |= {
        "FLEET_DATABASE_URL": f"sqlite:///{tmp_path / 'fleet.db'}",
        "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        # Tests run in parallel: the console on a port of its own, no metrics.
        "CONSOLE_PORT": str(free_port()),
        "METRICS_PORT": "off",
        # The code under test, whichever checkout the environment has installed.
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    }
    argv = [
        sys.executable,
        "-c",
        "from starter.cli import main; main()",
        "up",
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        "--db-filename",
        str(tmp_path / "temporal.db"),
        *extra,
    ]
    return argv, env, port


async def stop(proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
    """SIGTERM (so `up` stops its dev server too) and collect the rest of the output."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return await asyncio.wait_for(proc.communicate(), timeout=30)
    except TimeoutError:
        proc.kill()
        raise


async def test_up_check_runs_the_stack_and_exits_zero(tmp_path: Path) -> None:
    argv, env, port = up_command(tmp_path, "--check")
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        await stop(proc)
    text = out.decode()
    assert proc.returncode == 0, (text, err.decode()[-2000:])
    assert "started here" in text and "LLM:        autopilot" in text
    assert "simulator at http://127.0.0.1:" in text
    assert "check: run #1 ok" in text
    # Hints name commands that work as shown from the checkout (not on PATH).
    assert '.venv/bin/fleet-agent ask "how is the fleet?"' in text
    assert ".venv/bin/temporal workflow query --address" in text
    assert not listening(port), "the dev server outlived `up --check`"
    store = Store(env["FLEET_DATABASE_URL"])
    try:
        assert [r.run for r in finished_runs(store, "fleet-agent")] == [1]
    finally:
        store.dispose()

    # The agent stays running in the dev server's database. With its store
    # gone, `up` refuses to start it on a new, empty one...
    _delete_store(tmp_path)
    refused = await _up_to_exit(argv, env, tmp_path)
    assert refused.code == 1, refused
    assert "does not exist" in refused.err and "'fleet-agent'" in refused.err, refused
    assert "--new-store" in refused.err and not (tmp_path / "fleet.db").exists()
    assert not listening(port), "the dev server outlived a refused `up`"

    # ... until told to: the agent goes on with its run numbers in a new store.
    accepted = await _up_to_exit([*argv, "--new-store"], env, tmp_path)
    assert accepted.code == 0, accepted
    assert "check: run #2 ok" in accepted.out
    store = Store(env["FLEET_DATABASE_URL"])
    try:
        assert [r.run for r in finished_runs(store, "fleet-agent")] == [2]
    finally:
        store.dispose()


def _delete_store(folder: Path) -> None:
    """The SQLite store `up_command` points at, with its WAL files, as an accident would."""
    for path in folder.glob("fleet.db*"):
        path.unlink()


async def _up_to_exit(argv: list[str], env: dict[str, str], cwd: Path) -> Result:
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        await stop(proc)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode()[-3000:])


async def test_up_serves_until_sigterm_then_stops_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, env, port = up_command(tmp_path, "--agent-id", "up-test")
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        seen: list[str] = []
        async with asyncio.timeout(40):
            while not any(line.startswith("agent started") for line in seen):
                line = (await proc.stdout.readline()).decode()
                assert line, f"`up` ended early: {''.join(seen)}"
                seen.append(line)
        result = await cli(
            capsys, "status", "--json", "--agent-id", "up-test", "--address", f"127.0.0.1:{port}"
        )
        assert result.code == 0, result
        assert json.loads(result.out)["agent_id"] == "up-test"
    finally:
        rest, err = await stop(proc)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "stopping" in rest.decode()
    assert not listening(port), "the dev server outlived `up`"


async def test_say_tells_the_sender_when_the_agent_refuses_the_message(
    env: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    """A paused agent whose pending triggers are full refuses a new message;
    `say` reads the refusal back and exits 1 with the agent's reason."""
    agent = new_agent(env)
    assert (await agent_cli(capsys, env, "start", "--paused", "--agent-id", agent)).code == 0
    handle = env.harness.client.get_workflow_handle(agent)
    for start in range(0, 800, 100):
        await asyncio.gather(
            *(
                handle.signal("human_message", {"text": f"filler {i} " + "z" * 300})
                for i in range(start, start + 100)
            )
        )
    refused = await agent_cli(capsys, env, "say", "one more thing", "--agent-id", agent)
    # (The worker runs in this process: its log lines share stderr; the CLI's is last.)
    assert refused.code == 1, refused
    last = refused.err.strip().splitlines()[-1]
    assert last.startswith("fleet-agent: error: ") and f"agent {agent!r} refused" in last, last
    assert "already wait for the next run" in last
    kept = await agent_cli(capsys, env, "status", "--json", "--agent-id", agent)
    status = json.loads(kept.out)
    assert status["rejected"][-1]["preview"] == "one more thing"
    assert status["rejected_total"] >= 1


async def test_freeze_and_unfreeze_from_the_cli(
    env: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = new_agent(env)
    assert (await agent_cli(capsys, env, "start", "--paused", "--agent-id", agent)).code == 0
    me = os_identity()
    frozen = await agent_cli(capsys, env, "freeze", "--reason", "incident 42", "--agent-id", agent)
    assert frozen.code == 0, frozen
    assert frozen.out.startswith(f"frozen by {me} at ") and "incident 42" in frozen.out
    assert "no machine is rented: $0.00/h" in frozen.out
    shown = await agent_cli(capsys, env, "status", "--agent-id", agent)
    assert "phase:" in shown.out and "frozen" in shown.out and "incident 42" in shown.out
    as_json = json.loads(
        (await agent_cli(capsys, env, "status", "--json", "--agent-id", agent)).out
    )
    assert as_json["phase"] == "frozen" and as_json["frozen"]["author"] == me
    again = await agent_cli(capsys, env, "freeze", "--agent-id", agent)
    assert again.code == 0 and again.out.startswith(f"already frozen by {me}")
    thawed = await agent_cli(capsys, env, "unfreeze", "--reason", "fixed", "--agent-id", agent)
    assert thawed.code == 0 and thawed.out.startswith("unfrozen"), thawed
    as_json = json.loads(
        (await agent_cli(capsys, env, "status", "--json", "--agent-id", agent)).out
    )
    assert as_json["frozen"] is None and as_json["phase"] == "paused"


async def test_approvals_approve_and_deny_from_the_cli(
    env: Stack, capsys: pytest.CaptureFixture[str], sim: SimServer
) -> None:
    agent = new_agent(env)
    started = await agent_cli(
        capsys,
        env,
        "start",
        "--target",
        "40",
        "--set",
        "monitor_enabled=false",
        "--set",
        "approval_mode=always",
        "--agent-id",
        agent,
    )
    assert started.code == 0, started

    async def listed() -> str:
        shown = await agent_cli(capsys, env, "approvals", "--agent-id", agent)
        return shown.out if "create_instance" in shown.out else ""

    text = await eventually(listed, timeout=60, what="an approval to be listed")
    approval_id = text.split()[0]
    assert "approval_mode is always" in text and f"fleet-agent approve {approval_id}" in text
    pending = json.loads(
        (await agent_cli(capsys, env, "approvals", "--json", "--agent-id", agent)).out
    )
    assert [p["id"] for p in pending] == [approval_id] and pending[0]["dph"] > 0
    st = await agent_cli(capsys, env, "status", "--agent-id", agent)
    assert "APPROVAL:" in st.out and approval_id in st.out

    unknown = await agent_cli(capsys, env, "deny", "a999-1", "--agent-id", agent)
    assert_one_line_error(unknown, "no pending approval 'a999-1'", approval_id)
    ok = await agent_cli(
        capsys,
        env,
        "approve",
        approval_id,
        "--note",
        "fine",
        "--agent-id",
        agent,
    )
    assert ok.code == 0 and ok.out.startswith(f"approved {approval_id} (create_instance"), ok
    assert f"as {os_identity()}: fine" in ok.out

    def ours() -> list[dict[str, Any]]:
        return [i for i in sim.market.state()["instances"] if agent in str(i.get("label"))]

    async def rented() -> bool:
        return len(ours()) == 1

    await eventually(rented, timeout=60, what="the approved machine to be rented")
    twice = await agent_cli(capsys, env, "deny", approval_id, "--agent-id", agent)
    assert_one_line_error(twice, f"already decided: approved by {os_identity()}")
