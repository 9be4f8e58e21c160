"""A message's text reaches the model by one path (workflows/agent_runs.py,
ONE_PATH_PATCH; docs/decisions/one-message-path.md): on the real dev server,
a message signalled to a new agent goes whole into its run's input, the
run's load_context stores it and the model reads it; the agent's history
holds no `store_operator_messages` activity (the activity that queried the
texts back), nothing waits for the store, and the text is stored once.

Executions begun before the patch keep their paths: tests/workflows/test_one_path.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import InboxItem, TriggerKind
from fleet_agent.store import Store
from fleet_agent.store.inbox import Inbox
from testkit.fakes.anthropic_server import FakeAnthropic
from tests.helpers import eventually, finished_runs, running_worker, status
from workflows import FleetAgentWorkflow
from workflows.agent_runs import ONE_PATH_PATCH


class CountingInbox(Inbox):
    """An inbox that counts the writes of message texts by the store loop's
    activity (`store_operator_messages`) and by anything else."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.loop_writes = 0
        self.writes: list[str] = []

    def stash_messages(self, agent_id: str, items: Sequence[InboxItem]) -> int:
        if activity.in_activity() and activity.info().activity_type == "store_operator_messages":
            self.loop_writes += 1
        self.writes.extend(i.key for i in items)
        return super().stash_messages(agent_id, items)


class CountingStore(Store):
    inbox: CountingInbox

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.inbox = CountingInbox(self)


@pytest.fixture
def counted_store(tmp_path: Path) -> Iterator[CountingStore]:
    s = CountingStore(f"sqlite:///{tmp_path / 'fleet.db'}")
    s.create_all()
    yield s
    s.dispose()


async def test_a_message_reaches_the_model_in_its_run_alone(
    dev_env: WorkflowEnvironment, counted_store: CountingStore, fake_llm: FakeAnthropic
) -> None:
    text = "Hold 400 proofs/h from now on. " + "Because the backlog grew. " * 80
    async with running_worker(dev_env.client, counted_store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.5)
        await eventually(
            lambda: asyncio.to_thread(lambda: len(finished_runs(counted_store, handle.id)) >= 1),
            what="the start-up run",
        )
        await handle.signal(FleetAgentWorkflow.human_message, {"text": text})

        def answered() -> bool:
            runs = finished_runs(counted_store, handle.id)
            return any(
                t.kind == TriggerKind.HUMAN_MESSAGE and t.text == text
                for r in runs
                for t in r.triggers
            )

        await eventually(lambda: asyncio.to_thread(answered), timeout=20, what="the answer")
        assert any(text in r.last_user_text() for r in fake_llm.requests), "the model read it"
        assert (await status(handle)).unstored_messages == 0
        history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert "store_operator_messages" not in scheduled, scheduled
    markers = [
        e.marker_recorded_event_attributes.SerializeToString()
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    assert any(ONE_PATH_PATCH.encode() in m for m in markers), "a new execution takes the path"
    assert counted_store.inbox.loop_writes == 0
    keys = [
        t.text_key
        for r in finished_runs(counted_store, handle.id)
        for t in r.triggers
        if t.kind == TriggerKind.HUMAN_MESSAGE
    ]
    stored = counted_store.inbox.inbox_texts(handle.id, keys)
    assert [i.text for i in stored.values()] == [text]  # one row, the whole text
    assert counted_store.inbox.writes.count(keys[0]) == 1, "stored once, by load_context"
