"""A store filled for the tests of compaction (`compact_session`): the agent
and the time its runs start from, the history token budget they compact to,
and `add_run`, which records a finished run whose operator message and
mutating tool call are long enough to leave the prompt's window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fleet_agent.llm.transcript import StoredReply, StoredToolResults, dumps
from fleet_agent.models import ToolResult, Trigger, TriggerKind
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
