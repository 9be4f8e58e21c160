"""The store's session summaries and the bounded read of the prompt's history."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from fleet_agent.store import Store, SummaryRecord
from tests.helpers import finish_ok

AGENT = "a"
T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def add_runs(store: Store, runs: range, session: int = 1) -> None:
    store.sessions.ensure_session(AGENT, session, "", T0)
    for run in runs:
        at = T0 + timedelta(minutes=run)
        store.run_writes.begin_run(AGENT, run, session, [], f"trigger {run}", at)
        finish_ok(store, AGENT, run, at, final_text=f"answer {run}")


def summary(by: int, first: int, upto: int, body: str = "- x") -> SummaryRecord:
    return SummaryRecord(
        agent_id=AGENT,
        session=1,
        made_by_run=by,
        first_run=1,
        from_run=first,
        upto_run=upto,
        body=body,
        source="digest",
        tokens=1,
        created_at=T0,
    )


def test_summaries_are_idempotent_and_each_round_of_a_run_reads_the_same(store: Store) -> None:
    first = store.summaries.add_summary(summary(10, 1, 4, "- first"))
    assert store.summaries.add_summary(summary(10, 1, 4, "- a retry")) == first
    store.summaries.add_summary(summary(20, 5, 9))
    latest = store.summaries.latest_summary(AGENT, 1)
    assert latest is not None and latest.upto_run == 9
    before = store.summaries.latest_summary(AGENT, 1, before_run=20)
    assert before is not None and before.body == "- first"
    assert store.summaries.latest_summary(AGENT, 2) is None
    found = store.summaries.summary_of_run(AGENT, 7)
    assert found is not None and found.from_run == 5
    assert store.summaries.summary_of_run(AGENT, 12) is None
    assert [s.upto_run for s in store.summaries.session_summaries(AGENT, 1)] == [4, 9]
    store.delete_agent(AGENT)
    assert store.summaries.session_summaries(AGENT, 1) == []


def test_the_prompts_history_reads_only_the_runs_after_the_summary(store: Store) -> None:
    add_runs(store, range(1, 2_001))
    tail = store.run_reads.prompt_history(AGENT, 1, 2_001, after_run=1_990)
    assert [e.run for e in tail] == list(range(1_991, 2_001))

    def seconds(after: int) -> float:
        start = time.perf_counter()
        for _ in range(5):
            store.run_reads.prompt_history(AGENT, 1, 2_001, after_run=after)
        return (time.perf_counter() - start) / 5

    # The tail read does not grow with the session: far cheaper than all of it.
    assert seconds(1_990) * 3 < seconds(0)
