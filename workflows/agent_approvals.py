"""Approvals on the agent's side: the pending list and the operators' decisions.

Decisions (docs/DECISIONS.md, "Approvals"): operators address the agent, not
its runs — `decide_approval` is an update of the agent workflow (the ID they
know), and the agent forwards the decision to the waiting run by signal. The
run tells the agent what it waits for (`approval_requested`) and when a wait
ended without a decision (`approval_closed`); the agent keeps the list in its
durable state, so `status`, the Web UI and a continue-as-new all see it. A
`freeze` denies every pending approval. `ApprovalsBook` holds that logic;
FleetAgentWorkflow (workflows/agent.py) declares the handlers and delegates to
it. Deterministic: workflow code.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure helpers.
    from fleet_agent.loop.inputs import parse_payload
    from fleet_agent.models import (
        APPROVAL_CLOSED,
        APPROVAL_DECIDED,
        APPROVAL_REQUESTED,
        ApprovalClosed,
        ApprovalDecision,
        ApprovalDecisionRequest,
        ApprovalOutcome,
        PendingApproval,
    )
    from workflows.agent_notify import approval_facts
    from workflows.agent_state import AgentExecution

__all__ = ["ApprovalsBook"]

# Runs go one at a time and call tools in turn, so one approval is pending at
# most; the bound only keeps forged signals from growing the state.
_MAX_PENDING = 10
_MAX_DECIDED = 20


class ApprovalsBook:
    """The pending approvals in the agent's state, and the decisions on them."""

    def __init__(self, ex: AgentExecution) -> None:
        self._ex = ex

    def requested(self, raw: Any) -> None:
        """A run of this agent waits for an operator's decision (internal)."""
        ex = self._ex
        ex.signals += 1
        pending = ex.valid(parse_payload(PendingApproval, raw), APPROVAL_REQUESTED, raw)
        if pending is None:
            return
        state = ex.state
        state.pending_approvals = [
            *[p for p in state.pending_approvals if p.id != pending.id][-(_MAX_PENDING - 1) :],
            pending,
        ]
        workflow.logger.warning(
            "approval %s needed: %s (%s)", pending.id, pending.tool, pending.reason
        )
        ex.notifier.emit("approval_requested", pending.id, **approval_facts(pending))
        ex.show()

    def closed(self, raw: Any) -> None:
        """A run stopped waiting without a decision from here (its timeout)."""
        ex = self._ex
        ex.signals += 1
        closed = ex.valid(parse_payload(ApprovalClosed, raw), APPROVAL_CLOSED, raw)
        if closed is None:
            return
        pending = self._take_pending(closed.approval_id)
        if pending is not None:
            self._remember(closed.decision)
            if closed.decision.by == "timeout":
                ex.notifier.emit("approval_expired", pending.id, **approval_facts(pending))
            ex.show()

    async def decide(self, raw: Any) -> ApprovalOutcome:
        """An operator's decision: recorded, then forwarded to the run that waits."""
        req = parse_payload(ApprovalDecisionRequest, raw).value
        pending = None if req is None else self._take_pending(req.approval_id)
        if req is None or pending is None:
            # The validator refused it already; guards a replay of older code.
            raise ApplicationError("unknown approval", non_retryable=True)
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
        self._ex.show()
        error = await self._tell_run(pending, decision)
        return ApprovalOutcome(approval=pending, decision=decision, error=error)

    def validate_decision(self, raw: Any) -> None:
        """Refused before it reaches history: an unknown, decided or expired ID."""
        parsed = parse_payload(ApprovalDecisionRequest, raw)
        if parsed.value is None:
            raise ValueError(f"decide_approval refused: {parsed.error}")
        state = self._ex.state
        wanted = parsed.value.approval_id
        if any(p.id == wanted for p in state.pending_approvals):
            return
        for earlier in reversed(state.decided_approvals):
            if earlier.approval_id == wanted:
                verdict = "approved" if earlier.approve else "denied"
                raise ValueError(
                    f"approval {wanted} was already decided: {verdict} by {earlier.author} "
                    f"({earlier.by}) at {earlier.at:%Y-%m-%d %H:%M:%S} UTC"
                )
        waiting = ", ".join(p.id for p in state.pending_approvals) or "none"
        raise ValueError(f"no pending approval {wanted!r} (pending: {waiting})")

    async def deny_all(self, author: str, reason: str) -> None:
        """The freeze's part: every pending approval is denied, and its run told."""
        for pending in list(self._ex.state.pending_approvals):
            self._take_pending(pending.id)
            decision = ApprovalDecision(
                approval_id=pending.id,
                approve=False,
                note=f"the agent was frozen{': ' + reason if reason else ''}",
                author=author,
                at=workflow.now(),
                by="freeze",
            )
            self._remember(decision)
            await self._tell_run(pending, decision)

    def drop_of(self, run: int) -> None:
        """A run ended: whatever it waited for is no longer pending."""
        state = self._ex.state
        state.pending_approvals = [p for p in state.pending_approvals if p.run != run]

    def _take_pending(self, approval_id: str) -> PendingApproval | None:
        state = self._ex.state
        found = next((p for p in state.pending_approvals if p.id == approval_id), None)
        state.pending_approvals = [p for p in state.pending_approvals if p.id != approval_id]
        return found

    def _remember(self, decision: ApprovalDecision) -> None:
        state = self._ex.state
        state.decided_approvals = [*state.decided_approvals[-(_MAX_DECIDED - 1) :], decision]
        state.notify.digest_approvals += 1

    async def _tell_run(self, pending: PendingApproval, decision: ApprovalDecision) -> str:
        run = workflow.get_external_workflow_handle(pending.run_workflow_id)
        try:
            await run.signal(APPROVAL_DECIDED, decision)
        except FailureError as exc:
            workflow.logger.warning("run of approval %s not told: %s", pending.id, exc)
            return f"run #{pending.run} could not be told (it has ended?): {exc}"
        return ""
