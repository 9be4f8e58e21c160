"""A run's `expect_demand` tool: a known demand event the model was told of.

Decided inside the run against the events of the config it started with
plus its own, by the model's rule (fleet_agent/demand/events.py: within its
share, never displacing an operator's event); the parent workflow,
which owns the config, adds them when the run ends (`RunResult.demand_events`)
and tells the monitor. Everything here is workflow code and makes no
command: histories replay as before. Deterministic: `now` is the workflow's
clock.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Pass-through: pydantic models and pure rules.
    from fleet_agent.demand.events import MODEL_SHARE, merge_event
    from fleet_agent.demand.forecast import DemandEvent
    from fleet_agent.llm.tools import EXPECT_HORIZON_DAYS, ExpectDemandInput, parse_tool_input
    from fleet_agent.models import RunInput, ToolCall, ToolResult

__all__ = ["EventTools"]


class EventTools:
    """The known events of one run: those it started with, and what it added."""

    def __init__(self, inp: RunInput, now: Callable[[], datetime]) -> None:
        self._inp = inp
        self._now = now
        self._events: list[DemandEvent] = list(inp.config.demand_events)
        self.added: list[DemandEvent] = []

    def expect(self, call: ToolCall) -> ToolResult:
        """`expect_demand`: an event the parent adds to its config once the run ends.
        A bad call is an error result and changes nothing."""
        args = parse_tool_input(ExpectDemandInput, call.id, call.name, call.input)
        if isinstance(args, ToolResult):
            return args
        event = args.event()
        now = self._now()
        if isinstance(event, DemandEvent):
            if event.end <= now:
                event = f"that event ended already (it is {now:%Y-%m-%d %H:%M} UTC now)"
            elif event.start > now + timedelta(days=EXPECT_HORIZON_DAYS):
                event = f"that event starts more than {EXPECT_HORIZON_DAYS} days from now"
        if isinstance(event, str):
            return ToolResult(
                tool_use_id=call.id,
                name=call.name,
                content=f"Invalid input for {call.name}: {event}; nothing was recorded.",
                is_error=True,
            )
        merged = merge_event(self._events, event, now)
        if merged.refused:
            return ToolResult(
                tool_use_id=call.id,
                name=call.name,
                content=f"Refused: {merged.refused}; nothing was recorded. Only an operator "
                "can make room: tell them if the event matters.",
                is_error=True,
            )
        self._events = merged.events
        if merged.added:
            self.added.append(event)
        # Only what survives the run's own merges goes back to the parent.
        self.added = [e for e in self.added if e in merged.events]
        return ToolResult(
            tool_use_id=call.id, name=call.name, content=self._answer(event, merged.notes())
        )

    def _answer(self, event: DemandEvent, notes: list[str]) -> str:
        config = self._inp.config
        mine = sum(1 for e in self._events if e.set_by == "model")
        lines = [
            f"Recorded {event.describe()}; {len(self._events)} known event(s), {mine} of them "
            f"yours (at most {MODEL_SHARE})."
        ]
        lines += [f"Note: {n}." for n in notes]
        if config.target_mode == "demand":
            lines.append(
                f"The forecast takes it from {config.demand_lead_minutes:g} min before it "
                "starts (the target follows at the monitor's next poll)."
            )
        else:
            lines.append(
                "target_mode is fixed: events only act in demand mode, so the target stays "
                f"at {config.target_proofs_per_hour:g} proofs/h unless an operator changes it."
            )
        return "\n".join(lines)
