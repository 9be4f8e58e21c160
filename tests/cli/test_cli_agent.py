"""The `fleet-agent` agent commands against the real dev server (tests/helpers/cli.py):
`say` starts the agent and the run log shows it, `start` twice attaches,
`status --json` keeps its contract, `config` validates on the server, the wakes
table and `cancel-wake`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from fleet_agent.llm.base import LlmOptions, LlmReply, ProgressCallback, SystemPrompt
from fleet_agent.models import TokenUsage, TriggerKind
from fleet_agent.store import Store
from starter.identity import os_identity
from tests.helpers import eventually, running_worker
from tests.helpers.cli import (
    CONTRACT_KEYS,
    Result,
    Stack,
    agent_cli,
    assert_one_line_error,
    cli,
    env,
    new_agent,
    row_of,
    sim,
    stack,
    wait_run,
)

__all__ = ["env", "sim", "stack"]  # the fixtures, imported for pytest

pytestmark = pytest.mark.devserver


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
