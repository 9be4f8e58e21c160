"""The agent workflow's helpers own a slice of its state and return what
changed (docs/decisions/workflow-helpers.md): each one works on an
`AgentState` alone, with no workflow, execution or other helper around it.
"""

from __future__ import annotations

import ast
import logging
from datetime import UTC, datetime, timedelta

import pytest

from bench.structure.helper_reach import WORKFLOW_FILES, WORKFLOWS, measure
from fleet_agent.models import (
    AgentConfig,
    AgentState,
    ApprovalClosed,
    ApprovalDecision,
    ApprovalDecisionRequest,
    ConfigPatch,
    FreezeInfo,
    PendingApproval,
    UnfreezeRequest,
)
from workflows import agent_approvals, agent_config, agent_freeze
from workflows.agent_approvals import ApprovalsBook
from workflows.agent_config import ConfigKeeper
from workflows.agent_freeze import KillSwitch

NOW = datetime(2040, 1, 1, 12, tzinfo=UTC)


class _Clock:
    """The bits of `temporalio.workflow` a helper reads, at a fixed instant."""

    logger = logging.getLogger("test")

    @staticmethod
    def now() -> datetime:
        return NOW


@pytest.fixture(autouse=True)
def _clock(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in (agent_approvals, agent_freeze, agent_config):
        monkeypatch.setattr(module, "workflow", _Clock)


def _pending(approval_id: str, run: int = 1) -> PendingApproval:
    return PendingApproval(
        id=approval_id,
        run=run,
        run_workflow_id=f"a/run-{run}",
        tool="create_instance",
        tool_use_id="t1",
        reason="capacity",
        asked_at=NOW,
        expires_at=NOW + timedelta(minutes=30),
    )


def test_the_approvals_book_returns_each_decision_and_why_a_second_is_refused() -> None:
    state = AgentState()
    book = ApprovalsBook(state)
    book.add(_pending("ap1"))
    assert book.refusal("ap1") is None
    decided = book.decide(ApprovalDecisionRequest(approval_id="ap1", approve=True))
    assert decided is not None and decided.pending.id == "ap1" and decided.decision.approve
    assert state.pending_approvals == [] and state.decided_approvals == [decided.decision]
    assert book.decide(ApprovalDecisionRequest(approval_id="ap1", approve=False)) is None
    refusal = book.refusal("ap1")
    assert refusal is not None and "already decided: approved" in refusal


def test_a_closed_approval_is_returned_once_and_a_freeze_denies_the_rest() -> None:
    state = AgentState()
    book = ApprovalsBook(state)
    book.add(_pending("ap1"))
    book.add(_pending("ap2", run=2))
    timeout = ApprovalDecision(approval_id="ap1", approve=False, at=NOW, by="timeout")
    closed = ApprovalClosed(approval_id="ap1", decision=timeout)
    assert book.close(closed) is not None
    assert book.close(closed) is None, "closed twice"
    denied = book.deny_all("op", "stop")
    assert [d.pending.id for d in denied] == ["ap2"]
    assert denied[0].decision.by == "freeze" and not denied[0].decision.approve
    assert state.pending_approvals == []


def test_the_kill_switch_returns_the_config_that_follows_or_none() -> None:
    state = AgentState()
    switch = KillSwitch(state, "a")
    info = FreezeInfo(reason="r", author="op", at=NOW)
    frozen = switch.freeze(info, state.config)
    assert frozen is not None and frozen.frozen and switch.info == info
    assert switch.freeze(info, frozen) is None, "frozen already: nothing changes"
    unfrozen = switch.unfreeze(UnfreezeRequest(reason="ok"), frozen)
    assert unfrozen is not None and not unfrozen.config.frozen and switch.info is None
    assert "fleet changes are allowed again" in unfrozen.news
    assert switch.unfreeze(UnfreezeRequest(), unfrozen.config) is None


def test_the_config_keeper_says_what_a_patch_changed() -> None:
    state = AgentState(config=AgentConfig(monitor_enabled=False))
    keeper = ConfigKeeper(state, "a")
    change = keeper.apply(ConfigPatch(target_proofs_per_hour=500, heartbeat_seconds=900))
    assert state.config.target_proofs_per_hour == 500
    assert change.target_set and change.changed == ["heartbeat_seconds", "target_proofs_per_hour"]
    assert change.news.startswith("target_proofs_per_hour: ") and "heartbeat" not in change.news
    assert change.monitor and not change.start_monitor
    change = keeper.apply(ConfigPatch(monitor_enabled=True))
    assert change.start_monitor and not change.news
    assert keeper.refusal({"heartbeat_seconds": "soon"}) is not None
    assert keeper.refusal({"heartbeat_seconds": 600}) is None


def test_no_helper_reaches_into_another_or_the_execution() -> None:
    """The shape the decision record names, measured as bench/structure/
    helper_reach.py measures it: no helper module reaches through the
    execution or another helper, holds one, or imports the execution, and
    no import cycle is left among workflows/."""
    figures = measure()
    assert figures["helper_reaches"] == 0, figures["files"]
    assert figures["held_references"] == 0, figures["files"]
    assert figures["import_cycles"] == []
    helpers = [p for p in WORKFLOWS.glob("agent_*.py") if p.name not in WORKFLOW_FILES]
    for path in helpers:
        imported = {
            node.module
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module
        }
        others = {m for m in imported if m.startswith("workflows.agent")}
        assert others <= {"workflows.agent_approvals"}, (path.name, others)
