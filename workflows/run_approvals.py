"""A run's side of approvals: tell the agent, wait durably, hear the decision.

Used by AgentRunWorkflow (workflows/run.py) when a create/destroy tool
answers with an `ApprovalAsk` instead of acting. The agent workflow keeps the
pending list that `status` and the Web UI show and takes operators'
`decide_approval` updates; it forwards each decision to the run by signal
(`approval_decided`). The wait is a workflow condition with a timer: it
outlives worker restarts. All of a run's waits share one window of
`approval_timeout_seconds` (the run's execution timeout allows for exactly
that much waiting, AgentConfig.run_deadline_seconds). Deterministic: runs in
the workflow sandbox.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models only.
    from fleet_agent.models import (
        APPROVAL_CLOSED,
        APPROVAL_REQUESTED,
        ApprovalAsk,
        ApprovalClosed,
        ApprovalDecision,
        PendingApproval,
        RunInput,
        ToolCall,
    )

__all__ = ["ApprovalWaiter"]


class ApprovalWaiter:
    """The approvals of one run: at most one pending at a time (tools run in turn)."""

    def __init__(self, inp: RunInput) -> None:
        self._inp = inp
        self._asked = 0
        # approval_mode off when the run started: it has no time to wait.
        self._budget = float(inp.config.run_deadline_seconds() - inp.config.run_timeout_seconds)
        self._pending: PendingApproval | None = None
        self._decision: ApprovalDecision | None = None

    @property
    def pending(self) -> PendingApproval | None:
        return self._pending

    def hear(self, decision: ApprovalDecision) -> None:
        """The agent's forwarded decision; one for another approval is ignored."""
        if self._pending is not None and decision.approval_id == self._pending.id:
            self._decision = decision

    async def ask(self, call: ToolCall, ask: ApprovalAsk) -> ApprovalDecision:
        """Ask the operator through the agent; the decision, or a denial
        (`by` timeout) when none came in time or the agent could not be told."""
        inp = self._inp
        self._asked += 1
        now = workflow.now()
        approval_id = f"a{inp.run}-{self._asked}"
        if self._budget <= 0:
            return _denied(
                approval_id,
                "this run has no time to wait for an approval (approval_mode was off when it "
                "started); the next run can ask",
            )
        pending = PendingApproval(
            id=approval_id,
            run=inp.run,
            run_workflow_id=workflow.info().workflow_id,
            tool=call.name,
            tool_use_id=call.id,
            arguments=call.input,
            dph=ask.dph,
            reason=ask.reason,
            asked_at=now,
            expires_at=now + timedelta(seconds=self._budget),
        )
        agent = workflow.get_external_workflow_handle(inp.agent_id)
        try:
            await agent.signal(APPROVAL_REQUESTED, pending)
        except FailureError as exc:
            return _denied(approval_id, f"the agent could not be told ({exc})")
        self._pending, self._decision = pending, None
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: self._decision is not None,
                timeout=timedelta(seconds=self._budget),
                timeout_summary=f"approval {approval_id} of {call.name}",
            )
        waited = (workflow.now() - now).total_seconds()
        self._budget -= waited
        decision, self._pending = self._decision, None
        if decision is not None:
            return decision
        timed_out = _denied(approval_id, f"no operator decided within {waited:.0f} s", by="timeout")
        try:
            await agent.signal(
                APPROVAL_CLOSED, ApprovalClosed(approval_id=approval_id, decision=timed_out)
            )
        except FailureError as exc:
            workflow.logger.warning("could not tell the agent %s expired: %s", approval_id, exc)
        return timed_out


def _denied(approval_id: str, note: str, *, by: str = "timeout") -> ApprovalDecision:
    return ApprovalDecision(
        approval_id=approval_id,
        approve=False,
        note=note,
        author="fleet-agent",
        at=workflow.now(),
        by=by,
    )
