"""A run's wake tools: `schedule_next_check` and `cancel_wake`.

Decided inside the run (fleet_agent/loop/wakes.py rules) against the wakes the run
started with plus its own; the parent workflow, which owns the wakes, applies
the requests when the run ends. Deterministic: workflow code.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules.
    from fleet_agent.llm.tools import CancelWakeInput, ScheduleNextCheckInput, parse_tool_input
    from fleet_agent.loop.wakes import cancel_wake, decide_wake
    from fleet_agent.models import RunInput, ToolCall, ToolResult, Wake, WakeRequest

__all__ = ["WakeTools"]


class WakeTools:
    """The wakes of one run: those it started with, and what it asked for."""

    def __init__(self, inp: RunInput, now: Callable[[], datetime]) -> None:
        self._inp = inp
        self._now = now
        self._wakes: list[Wake] = list(inp.wakes)
        self.requests: list[WakeRequest] = []

    def schedule(self, call: ToolCall) -> ToolResult:
        """`schedule_next_check`: a wake the parent adds once the run ends."""
        args = parse_tool_input(ScheduleNextCheckInput, call.id, call.name, call.input)
        if isinstance(args, ToolResult):
            return args
        inp = self._inp
        wake_id = f"w{inp.run}-{len(self.requests) + 1}"
        decision = decide_wake(
            self._wakes,
            now=self._now(),
            delay_seconds=args.delay_seconds,
            reason=args.reason,
            run=inp.run,
            wake_id=wake_id,
            heartbeat_seconds=inp.config.heartbeat_seconds,
        )
        if decision.outcome == "scheduled" and decision.wake is not None:
            self._wakes.append(decision.wake)
            self.requests.append(WakeRequest(op="add", wake=decision.wake))
        return ToolResult(
            tool_use_id=call.id,
            name=call.name,
            content=decision.message,
            is_error=decision.outcome == "refused",
        )

    def cancel(self, call: ToolCall) -> ToolResult:
        """`cancel_wake`: a pending wake the parent drops once the run ends."""
        args = parse_tool_input(CancelWakeInput, call.id, call.name, call.input)
        if isinstance(args, ToolResult):
            return args
        self._wakes, existed = cancel_wake(self._wakes, args.wake_id)
        if not existed:
            return ToolResult(
                tool_use_id=call.id,
                name=call.name,
                content=f"No pending wake {args.wake_id!r}.",
                is_error=True,
            )
        self.requests.append(WakeRequest(op="cancel", wake_id=args.wake_id))
        return ToolResult(tool_use_id=call.id, name=call.name, content=f"Cancelled {args.wake_id}.")
