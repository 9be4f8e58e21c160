"""`compact_session` on its own (ActivityEnvironment): with the autopilot the
digest writes the summary, from what the store holds of each run that leaves
the window: operator messages with author and time, and mutating tool calls
with their arguments and outcomes."""

from __future__ import annotations

from datetime import timedelta

from temporalio.testing import ActivityEnvironment

from activities.compact import CompactActivities, prompt_history
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.llm.prompt import format_time
from fleet_agent.models import CompactRequest
from fleet_agent.store import Store
from tests.helpers.compact import AGENT, BUDGET, T0, add_run


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
