"""Human approval of fleet changes: what a run asks, what an operator decides.

The flow (docs/DECISIONS.md, "Approvals"): a create/destroy tool finds that
the change needs an operator's say and answers with an `ApprovalAsk` instead
of acting. The run then tells its agent (`approval_requested`, a
`PendingApproval`), waits durably for a decision or the timeout, and calls
the tool again with the decision as its grant. Operators decide with the
agent's `decide_approval` update (an `ApprovalDecisionRequest`); the agent
forwards the `ApprovalDecision` to the waiting run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field

from fleet_agent.wire import Wire

from .base import Strict

__all__ = [
    "APPROVAL_CLOSED",
    "APPROVAL_DECIDED",
    "APPROVAL_REQUESTED",
    "ApprovalAsk",
    "ApprovalClosed",
    "ApprovalDecision",
    "ApprovalDecisionRequest",
    "ApprovalMode",
    "ApprovalOutcome",
    "PendingApproval",
]


# Signal names between a run and its agent, shared by sender and handler.
APPROVAL_REQUESTED = "approval_requested"  # run → agent: a PendingApproval
APPROVAL_CLOSED = "approval_closed"  # run → agent: an ApprovalClosed (timeout)
APPROVAL_DECIDED = "approval_decided"  # agent → run: an ApprovalDecision

#: `approval_mode`: when a fleet change waits for an operator. `off`: never
#: (a destroy below the capacity floor is refused instead); `threshold`: a
#: create above the $/h thresholds, a destroy below the floor; `always`:
#: every create and destroy. A Literal, so strict payloads take the string.
ApprovalMode = Literal["off", "threshold", "always"]


class ApprovalAsk(Wire):
    """A tool's answer when its change needs an approval: nothing was done."""

    reason: str
    dph: float = 0.0  # how the fleet's $/h changes: + for a create, − for a destroy


class PendingApproval(Wire):
    """An approval a run waits for: shown by `status` and the Web UI."""

    id: str
    run: int
    run_workflow_id: str
    tool: str
    tool_use_id: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    dph: float = 0.0
    reason: str
    asked_at: datetime
    expires_at: datetime


class ApprovalDecisionRequest(Strict):
    """`decide_approval`: `{"approval_id", "approve", "note", "author"}`."""

    approval_id: Annotated[str, Field(min_length=1, max_length=64)]
    approve: bool
    note: Annotated[str, Field(max_length=500)] = ""
    author: Annotated[str, Field(min_length=1, max_length=100)] = "operator"


class ApprovalDecision(Wire):
    """A decision as the run receives it (and the agent remembers it).

    `by` says how it came: an operator's `decide_approval`, a `freeze`
    (denies all pending), or the timeout.
    """

    approval_id: str
    approve: bool
    note: str = ""
    author: str = "operator"
    at: datetime
    by: str = "operator"  # operator | freeze | timeout
    #: The $/h of the change the operator approved (the ask's `dph`), set by
    #: the run when it calls the tool again: a create whose offer costs more
    #: by then asks again instead of renting.
    approved_dph: float | None = None


class ApprovalClosed(Wire):
    """From a run to its agent: an approval ended without the agent (timeout)."""

    approval_id: str
    decision: ApprovalDecision


class ApprovalOutcome(Wire):
    """The `decide_approval` update's answer."""

    approval: PendingApproval
    decision: ApprovalDecision
    #: Empty when the run was told; otherwise why it could not be.
    error: str = ""
