"""A tool call's input parsed for the model (`fleet_agent.llm.tools.parse_tool_input`):
bad input is an error result the model reads, good input parses. Pure: no server."""

from __future__ import annotations

import pytest

from fleet_agent.llm.tools import CancelWakeInput, ScheduleNextCheckInput, parse_tool_input
from fleet_agent.models import ToolResult


@pytest.mark.parametrize(
    "raw",
    [
        {"delay_seconds": "NaN", "reason": "r"},
        {"delay_seconds": 900, "reason": "r", "extra": 1},
        {"reason": "no delay"},
    ],
)
def test_bad_schedule_input_is_an_error_result_for_the_model(raw: dict[str, object]) -> None:
    result = parse_tool_input(ScheduleNextCheckInput, "toolu_1", "schedule_next_check", raw)
    assert isinstance(result, ToolResult) and result.is_error
    assert result.content.startswith("Invalid input for schedule_next_check:")


def test_good_tool_input_parses() -> None:
    args = parse_tool_input(CancelWakeInput, "toolu_1", "cancel_wake", {"wake_id": "w3-1"})
    assert isinstance(args, CancelWakeInput) and args.wake_id == "w3-1"
