"""What a run tells the model and the Web UI: texts and small results.

Pure helpers of AgentRunWorkflow (workflows/run.py): the refusal of a tool
call from a cut-off reply, the notes of an approval's outcome, activity
labels. Deterministic; imported through the sandbox as pass-through.
"""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError

from fleet_agent.models import AgentConfig, ApprovalDecision, ToolCall, ToolResult

__all__ = [
    "COMPLETE",
    "CUT_TEXT",
    "MAX_TRUNCATIONS",
    "WINDOW_EXCEEDED",
    "approved_note",
    "describe",
    "not_approved",
    "not_run",
    "tool_summary",
    "window_error",
]


def describe(exc: BaseException) -> str:
    """The innermost message of an activity failure, for the run log."""
    while isinstance(exc, ActivityError) and exc.cause is not None:
        exc = exc.cause
    if isinstance(exc, ApplicationError):
        return f"{exc.type or 'error'}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"


# Stop reasons of a reply that ended where the model meant it to.
COMPLETE = frozenset({"end_turn", "tool_use", "stop_sequence"})
# A cut-off reply is answered with a request to go on this many times; the
# next one fails the run with a clear error.
MAX_TRUNCATIONS = 1
CUT_TEXT = (
    "Your reply was cut off at the output token limit. Continue briefly from where it "
    "stopped, and end with the verdict."
)


# The stop reason of a reply that filled the model's context window
# (https://platform.claude.com/docs/en/api/handling-stop-reasons).
WINDOW_EXCEEDED = "model_context_window_exceeded"


def window_error(config: AgentConfig, rnd: int) -> str:
    """Why a run ended when its reply filled the model's window twice."""
    return (
        f"round {rnd}'s reply filled the model's context window again after the run was "
        f"folded into a digest (stop_reason {WINDOW_EXCEEDED}); lower history_token_budget "
        f"(now {config.history_token_budget}) or max_output_tokens (now "
        f"{config.max_output_tokens}), or run a model with a larger window"
    )


def not_run(call: ToolCall, stop: str) -> ToolResult:
    """The answer to a tool call from a reply that was cut off: its input may be partial."""
    return ToolResult(
        tool_use_id=call.id,
        name=call.name,
        content=(
            f"Not executed: your reply was cut off (stop_reason {stop}) while you wrote it, so "
            "its input may be incomplete. Issue it again, with a shorter reply."
        ),
        is_error=True,
        not_run=True,
    )


def approved_note(decision: ApprovalDecision) -> str:
    note = f": {decision.note}" if decision.note else ""
    return f"[Approved by {decision.author} (approval {decision.approval_id}){note}]"


def not_approved(call: ToolCall, decision: ApprovalDecision, reason: str) -> ToolResult:
    """The refusal the model reads when an approval was denied or timed out."""
    how = {
        "timeout": "was not approved",
        "freeze": f"was denied by the kill switch ({decision.author})",
    }.get(decision.by, f"was denied by {decision.author}")
    note = f": {decision.note}" if decision.note else ""
    verb = "rented" if call.name == "create_instance" else "destroyed"
    return ToolResult(
        tool_use_id=call.id,
        name=call.name,
        content=(
            f"Refused: this {call.name} needed an operator's approval ({reason}); "
            f"approval {decision.approval_id} {how}{note}. Nothing was {verb}."
        ),
        is_error=True,
    )


def tool_summary(call: ToolCall) -> str:
    """A Web UI label such as 'create_instance offer 123'."""
    for key, word in (("offer_id", "offer"), ("instance_id", "instance"), ("gpu_name", "")):
        if key in call.input:
            return f"{call.name} {word} {call.input[key]}".replace("  ", " ")
    return call.name
