"""What the Web UI and search attributes show, pure: the search-attribute mode
setting, missing attributes named with their type, the answer preview, and the
details that lead with status and the last run's answer."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from temporalio.api.enums.v1 import IndexedValueType

from activities.visibility import missing_attributes
from fleet_agent.config.settings import Settings
from fleet_agent.llm.verdict import ANSWER_PREVIEW_CHARS, answer_preview
from fleet_agent.models import (
    AgentConfig,
    AgentState,
    LastRun,
    Phase,
    RunResult,
    RunStatus,
    SpendSummary,
    Verdict,
)
from fleet_agent.visibility.details import agent_details, last_run_line, run_details
from fleet_agent.visibility.search_attributes import search_attribute_mode


def test_search_attribute_mode_setting() -> None:
    assert Settings.from_env({}).search_attributes == "auto"
    assert Settings.from_env({"FLEET_SEARCH_ATTRIBUTES": " ON "}).search_attributes == "on"
    assert search_attribute_mode({"FLEET_SEARCH_ATTRIBUTES": "off"}) == "off"
    with pytest.raises(ValueError, match=r"^FLEET_SEARCH_ATTRIBUTES must be auto, on or off"):
        Settings.from_env({"FLEET_SEARCH_ATTRIBUTES": "yes"})


def test_missing_search_attributes_are_named_with_their_type() -> None:
    def kind(name: str) -> int:
        return IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{name}")

    registered = {
        "FleetAgentId": kind("KEYWORD"),
        "FleetPhase": kind("TEXT"),  # the wrong type counts as missing
        "RunVerdictAction": kind("BOOL"),
        "RunNoop": kind("BOOL"),
    }
    assert missing_attributes(registered) == ["FleetPhase (Keyword)", "RunTriggers (KeywordList)"]
    registered |= {"FleetPhase": kind("KEYWORD"), "RunTriggers": kind("KEYWORD_LIST")}
    assert missing_attributes(registered) == []


def test_answer_preview_is_short_flat_and_without_the_verdict() -> None:
    text = "First line.\n\n  Second   line.\n" + "x" * 500 + '\n<verdict>{"action": true}</verdict>'
    preview = answer_preview(text)
    assert preview.startswith("First line. Second line. xxx") and "verdict" not in preview
    assert len(preview) == ANSWER_PREVIEW_CHARS and preview.endswith("…")
    assert answer_preview('Fine.\n<verdict>{"action": false}</verdict>') == "Fine."
    assert answer_preview("") == ""


def test_the_web_ui_details_lead_with_status_and_the_last_runs_answer() -> None:
    state = AgentState(config=AgentConfig(target_proofs_per_hour=500), run_count=7)
    state.last_run = LastRun(
        run=7,
        status=RunStatus.OK,
        verdict=Verdict(action=True, state_changed=True),
        noop=False,
        answer="Rented one.",
    )
    state.spend = SpendSummary(as_of=datetime(2026, 11, 29, tzinfo=UTC), current_dph=1.5)
    first, second, *_ = agent_details(state, Phase.IDLE, None, None).split("\n\n")
    assert first == "**idle** · target 500 proofs/h · $1.50/h now · session 1 · 7 runs"
    assert second == "last run #7: ok, acted — answer: “Rented one.”"
    quiet = LastRun(run=8, status=RunStatus.OK, verdict=None, noop=True)
    assert last_run_line(quiet) == "last run #8: ok, no-op"
    failed = RunResult(run=9, status=RunStatus.FAILED, error="LLM 400", rounds=1)
    assert run_details(failed).split("\n\n") == [
        "**failed** · verdict unknown · 1 round(s) · 0 tool call(s)",
        "LLM 400",
    ]
    done = RunResult(
        run=10, status=RunStatus.OK, verdict=Verdict(action=False, state_changed=False)
    )
    done.answer, done.noop = "All steady.", True
    assert run_details(done).endswith(
        "no-op · 0 round(s) · 0 tool call(s)\n\nanswer: “All steady.”"
    )
