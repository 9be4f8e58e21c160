"""Approvals on the agent's side: the pending list and the operators' decisions.

Decisions (docs/DECISIONS.md, "Approvals"): operators address the agent, not
its runs — `decide_approval` is an update of the agent workflow (the ID they
know), and the agent forwards the decision to the waiting run by signal. The
run tells the agent what it waits for (`approval_requested`) and when a wait
ended without a decision (`approval_closed`); the agent keeps the list in its
durable state, so `status`, the Web UI and a continue-as-new all see it. A
`freeze` denies every pending approval.

`ApprovalsBook` owns the approvals' slice of the agent's state (`ApprovalsSlice`:
the pending list and the latest decisions) and nothing else. Its methods
change that slice and return what changed (the approval taken, the decision
made); FleetAgentWorkflow (workflows/agent.py) parses the payloads, and
decides what else follows (a notification, the Web UI, telling the run with
`tell_run`). Deterministic: workflow code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models.
    from fleet_agent.models import (
        APPROVAL_DECIDED,
        ApprovalClosed,
        ApprovalDecision,
        ApprovalDecisionRequest,
        PendingApproval,
    )

__all__ = ["ApprovalsBook", "ApprovalsSlice", "Decided", "approval_facts", "tell_run"]

# Runs go one at a time and call tools in turn, so one approval is pending at
# most; the bound only keeps forged signals from growing the state.
_MAX_PENDING = 10
_MAX_DECIDED = 20


class ApprovalsSlice(Protocol):
    """The approvals' slice of the durable state (fields of `AgentState`)."""

    pending_approvals: list[PendingApproval]
    decided_approvals: list[ApprovalDecision]


@dataclass(frozen=True)
class Decided:
    """An approval that is no longer pending, and the decision that ended it."""

    pending: PendingApproval
    decision: ApprovalDecision


class ApprovalsBook:
    """The pending approvals, and the decisions on them (the `ApprovalsSlice` only)."""

    def __init__(self, slice_: ApprovalsSlice) -> None:
        self._s = slice_

    @property
    def pending(self) -> list[PendingApproval]:
        return self._s.pending_approvals

    def add(self, pending: PendingApproval) -> None:
        """A run of this agent waits for an operator's decision."""
        s = self._s
        s.pending_approvals = [
            *[p for p in s.pending_approvals if p.id != pending.id][-(_MAX_PENDING - 1) :],
            pending,
        ]
        workflow.logger.warning(
            "approval %s needed: %s (%s)", pending.id, pending.tool, pending.reason
        )

    def close(self, closed: ApprovalClosed) -> Decided | None:
        """A run stopped waiting without a decision from here (its timeout):
        the approval it closed, or None when none such was pending."""
        pending = self._take(closed.approval_id)
        if pending is None:
            return None
        self._remember(closed.decision)
        return Decided(pending, closed.decision)

    def decide(self, req: ApprovalDecisionRequest) -> Decided | None:
        """An operator's decision, recorded (None: no such approval pending)."""
        pending = self._take(req.approval_id)
        if pending is None:
            return None
        decision = ApprovalDecision(
            approval_id=pending.id,
            approve=req.approve,
            note=req.note,
            author=req.author,
            at=workflow.now(),
        )
        self._remember(decision)
        workflow.logger.warning(
            "approval %s %s by %s", pending.id, "granted" if req.approve else "denied", req.author
        )
        return Decided(pending, decision)

    def refusal(self, approval_id: str) -> str | None:
        """Why a decision on `approval_id` is refused (unknown, decided or
        expired), or None when it is pending."""
        s = self._s
        if any(p.id == approval_id for p in s.pending_approvals):
            return None
        for earlier in reversed(s.decided_approvals):
            if earlier.approval_id == approval_id:
                verdict = "approved" if earlier.approve else "denied"
                return (
                    f"approval {approval_id} was already decided: {verdict} by {earlier.author} "
                    f"({earlier.by}) at {earlier.at:%Y-%m-%d %H:%M:%S} UTC"
                )
        waiting = ", ".join(p.id for p in s.pending_approvals) or "none"
        return f"no pending approval {approval_id!r} (pending: {waiting})"

    def deny_all(self, author: str, reason: str) -> list[Decided]:
        """The freeze's part: every pending approval is denied (their runs are
        still to be told)."""
        denied = []
        for pending in list(self._s.pending_approvals):
            self._take(pending.id)
            decision = ApprovalDecision(
                approval_id=pending.id,
                approve=False,
                note=f"the agent was frozen{': ' + reason if reason else ''}",
                author=author,
                at=workflow.now(),
                by="freeze",
            )
            self._remember(decision)
            denied.append(Decided(pending, decision))
        return denied

    def drop_of(self, run: int) -> None:
        """A run ended: whatever it waited for is no longer pending."""
        s = self._s
        s.pending_approvals = [p for p in s.pending_approvals if p.run != run]

    def _take(self, approval_id: str) -> PendingApproval | None:
        s = self._s
        found = next((p for p in s.pending_approvals if p.id == approval_id), None)
        s.pending_approvals = [p for p in s.pending_approvals if p.id != approval_id]
        return found

    def _remember(self, decision: ApprovalDecision) -> None:
        s = self._s
        s.decided_approvals = [*s.decided_approvals[-(_MAX_DECIDED - 1) :], decision]


async def tell_run(decided: Decided) -> str:
    """Signal the decision to the run that waits for it; an error is returned
    (the run may have ended), never raised."""
    pending = decided.pending
    run = workflow.get_external_workflow_handle(pending.run_workflow_id)
    try:
        await run.signal(APPROVAL_DECIDED, decided.decision)
    except FailureError as exc:
        workflow.logger.warning("run of approval %s not told: %s", pending.id, exc)
        return f"run #{pending.run} could not be told (it has ended?): {exc}"
    return ""


def approval_facts(pending: PendingApproval) -> dict[str, Any]:
    """What an approval's notifications show."""
    return {
        "tool": pending.tool,
        "dph": pending.dph,
        "reason": pending.reason[:300],
        "expires_at": pending.expires_at.isoformat(),
        "run": pending.run,
    }
