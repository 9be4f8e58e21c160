"""A run does not wait for the agent's store loop (workflows/agent_runs.py):
on the real dev server, with the loop's write of a message's text held back,
the message's run starts within its P0 window, its input carries the
message's preview, and its load_context stores the text it takes by the
loop's own path (the agent's query); the loop's own write, once let
through, is a no-op, and nothing waits for the store any more."""

from __future__ import annotations

import asyncio
import threading
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
from tests.helpers.history import in_json, raw_history
from workflows import FleetAgentWorkflow

HOLD_S = 60.0  # the longest the store loop's write is held (the test opens it sooner)


class LoopHeldInbox(Inbox):
    """An inbox whose writes of message texts by the store loop's activity
    (`store_operator_messages`) wait for `gate`; every other write goes through."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.gate = threading.Event()
        self.loop_writes = 0

    def stash_messages(self, agent_id: str, items: Sequence[InboxItem]) -> int:
        if activity.in_activity() and activity.info().activity_type == "store_operator_messages":
            self.loop_writes += 1
            assert self.gate.wait(HOLD_S), "the store loop's write was never let through"
        return super().stash_messages(agent_id, items)


class LoopHeldStore(Store):
    """A store whose inbox holds the store loop's writes (`LoopHeldInbox`)."""

    inbox: LoopHeldInbox

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.inbox = LoopHeldInbox(self)


@pytest.fixture
def held_store(tmp_path: Path) -> Iterator[LoopHeldStore]:
    s = LoopHeldStore(f"sqlite:///{tmp_path / 'fleet.db'}")
    s.create_all()
    yield s
    s.inbox.gate.set()
    s.dispose()


async def test_a_message_is_answered_while_the_store_loop_is_held(
    dev_env: WorkflowEnvironment, held_store: LoopHeldStore, fake_llm: FakeAnthropic
) -> None:
    text = "Hold 400 proofs/h from now on. " + "Because the backlog grew. " * 80
    async with running_worker(dev_env.client, held_store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.5)
        await eventually(
            lambda: asyncio.to_thread(lambda: len(finished_runs(held_store, handle.id)) >= 1),
            what="the start-up run",
        )
        await handle.signal(FleetAgentWorkflow.human_message, {"text": text})
        await eventually(
            lambda: asyncio.to_thread(lambda: held_store.inbox.loop_writes >= 1),
            what="the store loop's write to be held",
        )

        def answered() -> bool:
            runs = finished_runs(held_store, handle.id)
            return any(
                t.kind == TriggerKind.HUMAN_MESSAGE and t.text == text
                for r in runs
                for t in r.triggers
            )

        # Before this change the run waited for the held write: never, here.
        await eventually(lambda: asyncio.to_thread(answered), timeout=20, what="the answer")
        assert any(text in r.last_user_text() for r in fake_llm.requests)
        # The run's input had the preview: the text crossed history once, in
        # its signal, and reached the store by the agent's query.
        run = next(
            r.run
            for r in finished_runs(held_store, handle.id)
            if any(t.text == text for t in r.triggers)
        )
        history = await dev_env.client.get_workflow_handle(f"{handle.id}/run-{run}").fetch_history()
        assert in_json(text[-200:]) not in raw_history(history)
        st = await status(handle)
        assert st.unstored_messages == 1  # the loop's write is still held
        # Let it through: it finds the text stored and the agent forgets it.
        held_store.inbox.gate.set()

        async def forgotten() -> bool:
            return (await status(handle)).unstored_messages == 0

        await eventually(forgotten, what="the store loop to finish")
        keys = [
            t.text_key
            for r in finished_runs(held_store, handle.id)
            for t in r.triggers
            if t.kind == TriggerKind.HUMAN_MESSAGE
        ]
        stored = held_store.inbox.inbox_texts(handle.id, keys)
        assert [i.text for i in stored.values()] == [text]  # one row, the whole text
