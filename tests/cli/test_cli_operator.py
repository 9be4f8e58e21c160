"""An operator's decisions from the `fleet-agent` CLI against the real dev server
(tests/helpers/cli.py): a message the agent refuses, freeze and unfreeze,
approve and deny."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from simulator import SimServer
from starter.identity import os_identity
from tests.helpers import eventually
from tests.helpers.cli import Stack, agent_cli, assert_one_line_error, env, new_agent, sim, stack
from workflows.agent import FleetAgentWorkflow

__all__ = ["env", "sim", "stack"]  # the fixtures, imported for pytest

pytestmark = pytest.mark.devserver


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

    async def fillers_taken_in() -> bool:
        # Every filler kept or refused: the check after `say` then waits on
        # one signal, not on the agent working through 800 (a loaded CI
        # worker needed more than the check's wait for those).
        st = await handle.query(FleetAgentWorkflow.status)
        fillers = sum(1 for t in st.pending_triggers if t.text.startswith("filler"))
        return fillers + st.rejected_total >= 800 and st.rejected_total > 0

    await eventually(fillers_taken_in, timeout=120, what="the 800 fillers taken in")
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
