"""`compact_session` on its own (ActivityEnvironment): with the autopilot the
digest writes the summary, from what the store holds of each run that leaves
the window: operator messages with author and time, and mutating tool calls
with their arguments and outcomes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.testing import ActivityEnvironment

from activities.compact import CompactActivities, prompt_history
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.llm.prompt import format_time
from fleet_agent.llm.transcript import StoredReply, StoredToolResults, dumps
from fleet_agent.models import (
    CompactRequest,
    ToolResult,
    Trigger,
    TriggerKind,
)
from fleet_agent.store import Store
from tests.helpers import finish_ok

AGENT = "a"
T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)
BUDGET = 4_000


def add_run(store: Store, run: int) -> None:
    at = T0 + timedelta(minutes=5 * run)
    said = Trigger(
        seq=run,
        kind=TriggerKind.HUMAN_MESSAGE,
        received_at=at,
        text=f"Please rent one more 4090, note {run}. " + "x" * 3_000,
        author=f"op{run}",
    )
    store.run_writes.begin_run(AGENT, run, 1, [said], said.text, at)
    reply = StoredReply(
        content=[
            {
                "type": "tool_use",
                "id": f"t{run}",
                "name": "create_instance",
                "input": {"offer_id": 1000 + run, "reason": "target"},
            }
        ],
        stop_reason="tool_use",
    )
    store.messages.add_message(AGENT, run, 1, 1, "assistant", "assistant", dumps(reply), at)
    results = StoredToolResults(
        results=[
            ToolResult(
                tool_use_id=f"t{run}",
                name="create_instance",
                content=f"Created instance {run}\nmore",
                mutating=True,
            )
        ]
    )
    store.messages.add_message(AGENT, run, 2, 1, "user", "tool_results", dumps(results), at)
    finish_ok(
        store,
        AGENT,
        run,
        at,
        final_text="Rented one more.",
        actions_digest=f"- create_instance: Created instance {run}",
        mutating_calls=1,
        tool_calls=1,
        rounds=2,
    )


async def test_the_autopilots_digest_folds_messages_and_actions_from_the_store(
    store: Store,
) -> None:
    store.sessions.ensure_session(AGENT, 1, "", T0)
    for run in range(1, 9):
        add_run(store, run)
    before = prompt_history(store, AGENT, 1, 9, BUDGET)
    assert before.summary is None and before.unfolded > 0

    compact = CompactActivities(store, AutopilotProvider())
    req = CompactRequest(agent_id=AGENT, session=1, run=9, history_token_budget=BUDGET)
    result = await ActivityEnvironment().run(compact.compact_session, req)
    assert result.source == "digest" and result.fallback_reason == "no model (autopilot)"
    assert result.folded_runs == before.unfolded

    summary = store.summaries.latest_summary(AGENT, 1)
    assert summary is not None and summary.upto_run == result.upto_run
    for run in range(1, result.upto_run + 1):
        at = format_time(T0 + timedelta(minutes=5 * run))
        assert f"run #{run} {at}: op{run} said: Please rent one more 4090, note {run}." in (
            summary.body
        )
        assert f'create_instance({{"offer_id":{1000 + run},"reason":"target"}}) → ' in (
            summary.body
        )
    after = prompt_history(store, AGENT, 1, 9, BUDGET)
    assert after.unfolded == 0 and after.summary == summary
    assert after.summary_text.startswith(f"## Session summary (runs #1–#{result.upto_run}")
    # A retry finds nothing left to fold.
    assert (await ActivityEnvironment().run(compact.compact_session, req)).folded_runs == 0
