"""The run log activities outside any workflow: the inbox, and attempts of a replayed run.

ActivityEnvironment and a real Store on a temporary SQLite file.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from hashlib import sha256
from typing import cast

import pytest
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.runlog import RunLogActivities
from fleet_agent.llm.transcript import CONTEXT_SEQ
from fleet_agent.models import (
    AgentConfig,
    InboxItem,
    LoadContextRequest,
    RecordRunRequest,
    RunInput,
    RunResult,
    RunStatus,
    Trigger,
    TriggerKind,
)
from fleet_agent.store import Store

AGENT = "agent-runlog"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def env() -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, started_time=NOW)
    return env


def _key(seq: int, text: str) -> str:
    """The key scheme the workflow uses."""
    return f"{seq}-{sha256(text.encode()).hexdigest()[:12]}"


def _message(seq: int, text: str, *, stashed: bool = True) -> tuple[Trigger, InboxItem]:
    key = _key(seq, text)
    preview = text[:40] + "…"
    trigger = Trigger(
        seq=seq,
        kind=TriggerKind.HUMAN_MESSAGE,
        received_at=NOW,
        text=preview if stashed else text,
        author="alice",
        text_key=key if stashed else "",
    )
    return trigger, InboxItem(key=key, seq=seq, author="alice", text=text, received_at=NOW)


def _request(run: int, triggers: list[Trigger], workflow_run_id: str = "") -> LoadContextRequest:
    inp = RunInput(agent_id=AGENT, run=run, session=1, triggers=triggers, config=AgentConfig())
    return LoadContextRequest(
        run_input=inp, started_at=NOW + timedelta(minutes=run), workflow_run_id=workflow_run_id
    )


def _record(run: int, workflow_run_id: str, error: str = "") -> RecordRunRequest:
    result = RunResult(
        run=run,
        status=RunStatus.FAILED if error else RunStatus.OK,
        error=error,
        ended_at=NOW + timedelta(minutes=run, seconds=5),
    )
    return RecordRunRequest(
        agent_id=AGENT, session=1, result=result, workflow_run_id=workflow_run_id
    )


async def test_load_context_puts_the_full_inbox_texts_back(
    env: ActivityEnvironment, store: Store
) -> None:
    runlog = RunLogActivities(store)
    long_text = "Please scale to 40 machines. " + "detail " * 2_800 + "THE END"
    stashed, item = _message(1, long_text)
    inline, _ = _message(2, "a short one, sent inline", stashed=False)
    store.inbox.stash_messages(AGENT, [item])
    store.inbox.stash_messages(AGENT, [item])  # retry

    await env.run(runlog.load_context, _request(1, [stashed, inline]))

    record = store.run_reads.get_run(AGENT, 1)
    assert record is not None
    assert [t.text for t in record.triggers] == [long_text, "a short one, sent inline"]
    assert record.triggers[0].text_key == item.key  # the run log shows which text it was
    assert long_text in record.trigger_block and "a short one" in record.trigger_block
    context = store.messages.get_message(AGENT, 1, CONTEXT_SEQ)
    assert context is not None and "THE END" in context.content


async def test_a_text_not_yet_stashed_is_a_retryable_error_naming_the_key(
    env: ActivityEnvironment, store: Store
) -> None:
    runlog = RunLogActivities(store)
    present, item = _message(1, "stashed")
    absent, missing = _message(2, "the stash is still in flight")
    store.inbox.stash_messages(AGENT, [item])

    with pytest.raises(ApplicationError) as raised:
        await env.run(runlog.load_context, _request(1, [present, absent]))
    assert raised.value.type == "InboxTextMissing"
    assert not raised.value.non_retryable
    assert missing.key in str(raised.value)
    assert store.run_reads.get_run(AGENT, 1) is None  # nothing opened with a preview as the text

    # The stash lands; the retry goes through.
    store.inbox.stash_messages(AGENT, [missing])
    await env.run(runlog.load_context, _request(1, [present, absent]))
    record = store.run_reads.get_run(AGENT, 1)
    assert record is not None
    assert [t.text for t in record.triggers] == ["stashed", "the stash is still in flight"]


class _Agent:
    """The agent workflow as `activity.client()` reaches it: its
    `unstored_messages` query answers with the texts it holds."""

    def __init__(self, items: list[InboxItem]) -> None:
        self.items = items
        self.queried: list[tuple[str, str]] = []

    def get_workflow_handle(self, workflow_id: str) -> _Agent:
        self.queried.append((workflow_id, ""))
        return self

    async def query(self, name: str, *, result_type: object) -> list[InboxItem]:
        self.queried[-1] = (self.queried[-1][0], name)
        return self.items


def _asking(env: ActivityEnvironment, agent: _Agent) -> ActivityEnvironment:
    """`env` with `agent` as the activity's Temporal client."""
    with_client = ActivityEnvironment(client=cast(Client, agent))
    with_client.info = env.info
    return with_client


def _run_1_read(store: Store, item: InboxItem) -> tuple[bool, list[str], str, int]:
    """What shows run 1 took `item`'s whole text: whether the inbox has it,
    the record's trigger texts, the context message, and what a second write
    of the key (the store loop's, coming later) adds."""
    stored = store.inbox.inbox_texts(AGENT, [item.key]) == {item.key: item}
    record = store.run_reads.get_run(AGENT, 1)
    context = store.messages.get_message(AGENT, 1, CONTEXT_SEQ)
    return (
        stored,
        [t.text for t in record.triggers] if record is not None else [],
        context.content if context is not None else "",
        store.inbox.stash_messages(AGENT, [item]),
    )


async def test_a_text_the_store_lacks_comes_from_the_agent_by_its_query(
    env: ActivityEnvironment, store: Store
) -> None:
    """The run started before the agent's store loop stored the message
    (workflows/agent_runs.py): its input has the preview, and load_context
    takes the text by the loop's own path, the agent's query, and stores it."""
    runlog = RunLogActivities(store)
    text = "Scale down to 300 proofs/h tonight. " + "why " * 500
    trigger, item = _message(4, text)
    agent = _Agent([item])
    await _asking(env, agent).run(runlog.load_context, _request(1, [trigger]))

    assert agent.queried == [(AGENT, "unstored_messages")]
    stored, texts, context, second_write = _run_1_read(store, item)
    assert stored and texts == [item.text] and second_write == 0
    assert "Scale down to 300" in context


async def test_a_text_the_agent_no_longer_holds_is_retried_not_taken_from_the_preview(
    env: ActivityEnvironment, store: Store
) -> None:
    runlog = RunLogActivities(store)
    trigger, item = _message(5, "the whole text " + "x" * 300)
    with pytest.raises(ApplicationError) as raised:
        await _asking(env, _Agent([])).run(runlog.load_context, _request(1, [trigger]))
    assert raised.value.type == "InboxTextMissing" and not raised.value.non_retryable
    assert store.inbox.inbox_texts(AGENT, [item.key]) == {}
    assert store.run_reads.get_run(AGENT, 1) is None


async def test_a_text_a_run_of_0_2_0_brought_whole_is_stored_by_load_context(
    env: ActivityEnvironment, store: Store
) -> None:
    """An agent of 0.2.0 started the run before its store loop stored the
    message: the trigger has the whole text and its key, and the agent (with
    no Temporal client here) cannot be asked."""
    runlog = RunLogActivities(store)
    text = "Scale down to 300 proofs/h tonight. " + "why " * 500
    _, item = _message(4, text)
    whole = Trigger(
        seq=4,
        kind=TriggerKind.HUMAN_MESSAGE,
        received_at=NOW,
        text=text,
        author="alice",
        text_key=item.key,
    )
    await env.run(runlog.load_context, _request(1, [whole]))
    stored, texts, context, second_write = _run_1_read(store, item)
    assert stored and texts == [item.text] and second_write == 0
    assert "Scale down to 300" in context


async def test_a_text_of_another_agent_does_not_count(
    env: ActivityEnvironment, store: Store
) -> None:
    runlog = RunLogActivities(store)
    trigger, item = _message(1, "for someone else")
    store.inbox.stash_messages("other", [item])
    with pytest.raises(ApplicationError, match=item.key):
        await env.run(runlog.load_context, _request(1, [trigger]))


async def test_a_replayed_run_gets_its_own_attempt_and_record(
    env: ActivityEnvironment, store: Store
) -> None:
    runlog = RunLogActivities(store)
    trigger, _ = _message(1, "hello", stashed=False)
    await env.run(runlog.load_context, _request(1, [trigger], "wf-a"))
    await env.run(runlog.load_context, _request(1, [trigger], "wf-a"))  # activity retry
    await env.run(runlog.record_run, _record(1, "wf-a"))

    await env.run(runlog.load_context, _request(1, [trigger], "wf-b"))  # after a reset
    await env.run(runlog.record_run, _record(1, "wf-b", error="replay failed"))

    original, replay = store.run_reads.run_attempts(AGENT, 1)
    assert (original.attempt, original.workflow_run_id, original.status) == (
        1,
        "wf-a",
        RunStatus.OK,
    )
    assert (replay.attempt, replay.workflow_run_id, replay.status) == (
        2,
        "wf-b",
        RunStatus.FAILED,
    )
    assert replay.error == "replay failed"


async def test_closing_a_run_its_workflow_run_never_opened_is_permanent(
    env: ActivityEnvironment, store: Store
) -> None:
    runlog = RunLogActivities(store)
    trigger, _ = _message(1, "hello", stashed=False)
    await env.run(runlog.load_context, _request(1, [trigger], "wf-a"))

    with pytest.raises(ApplicationError) as raised:
        await env.run(runlog.record_run, _record(1, "wf-never-opened"))
    assert raised.value.type == "RunNotOpened" and raised.value.non_retryable
    assert "wf-never-opened" in str(raised.value)
    record = store.run_reads.get_run(AGENT, 1)
    assert record is not None and record.status is RunStatus.RUNNING

    with pytest.raises(ApplicationError, match="never opened"):
        await env.run(runlog.record_run, _record(2, ""))
