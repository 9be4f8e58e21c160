"""The `fleet-agent` CLI's failures are one clear line and a non-zero exit: an
unknown wake, a stopped agent, no worker, unreachable Temporal, usage and local
errors (tests/helpers/cli.py)."""

from __future__ import annotations

import asyncio
import socket
import uuid
from pathlib import Path

import pytest

from starter.agent_client import DEFAULT_CONNECT_TIMEOUT
from starter.cli import main
from tests.helpers.cli import (
    Result,
    Stack,
    agent_cli,
    assert_one_line_error,
    cli,
    env,
    new_agent,
    sim,
    stack,
)

__all__ = ["env", "sim", "stack"]  # the fixtures, imported for pytest

pytestmark = pytest.mark.devserver


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
    # A message is sent (it waits for a worker), but not claimed as taken in.
    sent = await cli(capsys, "say", "anyone there?", "--timeout", "1", *where)
    assert sent.code == 0, sent
    assert "message sent" in sent.out and "not yet confirmed" in sent.out, sent.out
    assert "did not answer within 1s" in sent.out, sent.out


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
