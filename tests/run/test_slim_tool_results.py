"""Slim fleet tool results: the workflow gets a status line, the store the text.

The tool journal holds each result; `store_tool_results` writes the round's
message from it, with the replay note and an approval's preface before it.
ActivityEnvironment and a real Store on a temporary SQLite file.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.fleet_results import replayed, slim
from activities.runlog import RunLogActivities
from fleet_agent.llm.transcript import StoredToolResults, tool_results_seq
from fleet_agent.models import AgentConfig, FleetToolRequest, StoreToolResults, ToolResult
from fleet_agent.store import Store, ToolJournal

AGENT = "agent-slim"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TEXT = "Rented instance 7: 1x RTX 4090 at $0.412/h\n" + "\n".join(
    f"detail line {i}" for i in range(200)
)


def _call(tool_use_id: str = "toolu_1", name: str = "create_instance") -> FleetToolRequest:
    return FleetToolRequest(
        agent_id=AGENT, run=3, round=1, tool_use_id=tool_use_id, name=name, config=AgentConfig()
    )


def _full(call: FleetToolRequest) -> ToolResult:
    return ToolResult(
        tool_use_id=call.tool_use_id, name=call.name, content=TEXT, mutating=True, dph_delta=0.412
    )


def test_slim_keeps_the_figures_and_the_first_line_only() -> None:
    result = slim(_full(_call()))
    assert result.stored and result.content == "Rented instance 7: 1x RTX 4090 at $0.412/h"
    assert (result.mutating, result.dph_delta, result.is_error) == (True, 0.412, False)
    long = _full(_call()).model_copy(update={"content": "x" * 500})
    assert len(slim(long).content) == 120


async def test_the_round_is_stored_with_the_journals_text_the_replay_note_and_the_preface(
    store: Store,
) -> None:
    journal = ToolJournal(store)
    first, second = _call("toolu_1"), _call("toolu_2", "get_fleet_status")
    journal.finish(first, _full(first), NOW)
    record = journal.finish(second, _full(second), NOW)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, started_time=NOW)
    results = [
        slim(_full(first)).model_copy(update={"preface": "[Approved by alice]"}),
        slim(replayed(record)),
        ToolResult(tool_use_id="toolu_3", name="cancel_wake", content="Cancelled w1."),
    ]
    assert results[1].content == "replayed: Rented instance 7: 1x RTX 4090 at $0.412/h"
    runlog = RunLogActivities(store)
    await env.run(
        runlog.store_tool_results,
        StoreToolResults(agent_id=AGENT, run=3, round=1, results=results),
    )
    message = store.messages.get_message(AGENT, 3, tool_results_seq(1))
    assert message is not None
    stored = StoredToolResults.model_validate_json(message.content).results
    assert stored[0].content == f"[Approved by alice]\n{TEXT}"
    assert stored[1].content.startswith("[Replayed: this tool call already ran in run 3")
    assert stored[1].content.endswith(f"]\n{TEXT}") and stored[1].replayed
    assert stored[2].content == "Cancelled w1."
    assert not any(r.stored or r.preface for r in stored)

    # A status line whose text the journal does not have is an error, never sent as is.
    lost = slim(_full(_call("toolu_9")))
    with pytest.raises(ApplicationError, match="no result in the tool journal"):
        await env.run(
            runlog.store_tool_results,
            StoreToolResults(agent_id=AGENT, run=3, round=2, results=[lost]),
        )
