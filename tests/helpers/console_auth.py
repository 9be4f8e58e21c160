"""The web console's app with an agent that records what it is sent, for the
tests of who may use the console: two tokens, a pending approval, and clients
with tokens or on loopback. Import the fixtures into a test module."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from starlette.testclient import TestClient
from temporalio.client import Client

from fleet_agent.models import (
    AgentStatus,
    ApprovalDecision,
    ApprovalOutcome,
    PendingApproval,
    Phase,
)
from starter.agent_client import AgentClient
from starter.console import ConsoleSettings, create_app
from tests.helpers import idle_status

BASE = "http://127.0.0.1:8080"
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdefgh"
NOW = datetime.now(UTC)
PENDING = PendingApproval(
    id="a3-1",
    run=3,
    run_workflow_id="agent/run-3",
    tool="create_instance",
    tool_use_id="tu-1",
    arguments={"offer_id": 991},
    dph=0.731,
    reason="offer costs $0.731/h, above approval_above_dph 0.5",
    asked_at=NOW,
    expires_at=NOW + timedelta(minutes=50),
)


async def _unreachable() -> Client:
    raise AssertionError("the recording agent never connects")


class RecordingAgent(AgentClient):
    """An agent with one pending approval that records what it is sent."""

    def __init__(self) -> None:
        super().__init__(_unreachable, "console-agent")
        self.signals: list[tuple[str, dict[str, Any]]] = []
        self.decisions: list[dict[str, Any]] = []

    async def status(self) -> AgentStatus:
        return idle_status(
            self.agent_id,
            run_count=3,
            phase=Phase.RUNNING,
            current_run=3,
            pending_approvals=[] if self.decisions else [PENDING],
        )

    async def signal_with_start(self, signal: str, arg: dict[str, Any]) -> bool:
        self.signals.append((signal, arg))
        return False

    async def refusal(self, signal: str, payload: Any, since: datetime, *, wait: float = 3.0):  # type: ignore[no-untyped-def]
        return None

    async def decide_approval(self, request: dict[str, Any]) -> ApprovalOutcome:
        self.decisions.append(request)
        decision = ApprovalDecision(
            approval_id=request["approval_id"],
            approve=request["approve"],
            note=request.get("note", ""),
            author=request["author"],
            at=NOW,
        )
        return ApprovalOutcome(approval=PENDING, decision=decision)


@pytest.fixture
def agent() -> RecordingAgent:
    return RecordingAgent()


def _client(agent: AgentClient, settings: ConsoleSettings, **headers: str) -> TestClient:
    app = create_app(agent, settings)
    return TestClient(app, base_url=BASE, headers=headers, raise_server_exceptions=False)


@pytest.fixture
def with_tokens(agent: RecordingAgent) -> Iterator[TestClient]:
    """A console with two named tokens (as `CONSOLE_TOKEN` gives them), and
    the Origin a browser on its page sends."""
    settings = ConsoleSettings(tokens=(("alice", ALICE), ("bob", BOB)))
    with _client(agent, settings, Origin=BASE) as client:
        yield client


@pytest.fixture
def loopback(agent: RecordingAgent) -> Iterator[TestClient]:
    """A console without tokens (loopback): anyone here, as its OS identity."""
    with _client(agent, ConsoleSettings(), Origin=BASE) as client:
        yield client


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
