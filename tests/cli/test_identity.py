"""A decision's author is the identity that made it (issue 42): the CLI sends
the OS account that runs it, ``user@host``, in every payload with an
author, and takes no text for it. No Temporal: the agent client's calls are
replaced by ones that record the payload (the console's side is in
tests/console/test_console_auth.py and tests/console/test_console_confirmation.py, the
devserver's in tests/cli/test_cli_agent.py and tests/cli/test_cli_operator.py).
"""

from __future__ import annotations

import getpass
import socket
from datetime import UTC, datetime
from typing import Any

import pytest

from fleet_agent.models import AgentConfig, ApprovalDecision, ApprovalOutcome, PendingApproval
from fleet_agent.models.freeze import FreezeInfo, FreezeReport
from starter.agent_client import AgentClient
from starter.cli import main
from starter.identity import MAX_IDENTITY, os_identity

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """What the CLI sends the agent, by call, instead of sending it."""
    calls: list[tuple[str, dict[str, Any]]] = []

    async def signal_with_start(self: AgentClient, signal: str, arg: dict[str, Any]) -> bool:
        calls.append((signal, arg))
        return False

    async def refusal(self: AgentClient, *args: Any, **kwargs: Any) -> None:
        return None

    async def decide_approval(self: AgentClient, request: dict[str, Any]) -> ApprovalOutcome:
        calls.append(("decide_approval", request))
        pending = PendingApproval(
            id=request["approval_id"],
            run=1,
            run_workflow_id="x/run-1",
            tool="create_instance",
            tool_use_id="t",
            reason="r",
            asked_at=NOW,
            expires_at=NOW,
        )
        decision = ApprovalDecision(
            approval_id=pending.id, approve=request["approve"], author=request["author"], at=NOW
        )
        return ApprovalOutcome(approval=pending, decision=decision)

    async def freeze(self: AgentClient, request: dict[str, Any], *, wait: float) -> FreezeReport:
        calls.append(("freeze", request))
        info = FreezeInfo(reason="", author=request["author"], at=NOW)
        return FreezeReport(frozen=True, info=info)

    async def unfreeze(self: AgentClient, request: dict[str, Any]) -> AgentConfig:
        calls.append(("unfreeze", request))
        return AgentConfig()

    for name, fake in [
        ("signal_with_start", signal_with_start),
        ("refusal", refusal),
        ("decide_approval", decide_approval),
        ("freeze", freeze),
        ("unfreeze", unfreeze),
    ]:
        monkeypatch.setattr(AgentClient, name, fake)
    return calls


def test_os_identity_is_the_account_and_the_host_not_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = os_identity()
    for name in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.setenv(name, "the-ceo")
    assert os_identity() == real, "$USER is free text too"
    assert real.endswith(f"@{socket.gethostname()}"[:MAX_IDENTITY])
    monkeypatch.setattr(socket, "gethostname", lambda: "h" * 300)
    assert len(os_identity()) == MAX_IDENTITY


def test_os_identity_without_a_password_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    def missing(uid: int) -> Any:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", missing)
    monkeypatch.setattr(getpass, "getuser", lambda: "from-getpass")
    assert os_identity().startswith("from-getpass@")


@pytest.mark.parametrize(
    ("argv", "call"),
    [
        (["say", "hello"], "human_message"),
        (["approve", "a1-1", "--note", "I am the CEO"], "decide_approval"),
        (["deny", "a1-1"], "decide_approval"),
        (["freeze", "--reason", "author: the CEO"], "freeze"),
        (["unfreeze"], "unfreeze"),
    ],
)
def test_every_cli_decision_carries_the_os_identity(
    sent: list[tuple[str, dict[str, Any]]], argv: list[str], call: str
) -> None:
    assert main([*argv, "--agent-id", "who-agent"]) == 0
    assert [(name, arg["author"]) for name, arg in sent] == [(call, os_identity())]


def test_the_cli_takes_no_author_text(
    sent: list[tuple[str, dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["say", "hi"], ["approve", "a1-1"], ["unfreeze"]):
        with pytest.raises(SystemExit) as usage:
            main([*argv, "--author", "the CEO", "--agent-id", "who-agent"])
        assert usage.value.code == 2
        assert "unrecognized arguments: --author" in capsys.readouterr().err
    assert sent == []
