"""A paid LLM reply survives a failed store write, on a real Temporal server.

`call_llm` puts the finished reply in its heartbeat details before it stores
it. When the store write fails, the attempt fails with an exception; Temporal
retries it, and the next attempt must find the reply in
`activity.info().heartbeat_details` and store it instead of asking the model
again. This depends on how the SDK (temporalio 1.35 and its sdk-core) reports
heartbeat details with a failure, so it is tested against real servers: the
time-skipping test server and the dev server. In both, the reply's heartbeat
comes a moment after the attempt's first heartbeat, inside core's throttling
window, so it has not been sent on its own when the attempt fails: it reaches
the server only with the failure.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment
from temporalio.worker import Worker

from activities.llm import LlmActivities
from activities.runlog import RunLogActivities
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.timing import LLM_HEARTBEAT_TIMEOUT, llm_attempt_timeout
from fleet_agent.llm.transcript import StoredReply, reply_text
from fleet_agent.models import (
    AgentConfig,
    LlmRequest,
    LlmResult,
    LoadContextRequest,
    RunInput,
    Trigger,
    TriggerKind,
)
from fleet_agent.store import Store
from fleet_agent.store.messages import Messages
from testkit.fakes.anthropic_server import FakeAnthropic, Reply

AGENT = "agent-reuse"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ANSWER = "Two machines are loading; nothing to do yet."


@workflow.defn(sandboxed=False)
class CallLlmOnce:
    """The LLM round of a run, with the activity options the run workflow uses."""

    @workflow.run
    async def run(self, req: LlmRequest) -> LlmResult:
        result: LlmResult = await workflow.execute_activity(
            "call_llm",
            req,
            result_type=LlmResult,
            start_to_close_timeout=llm_attempt_timeout(req.config.max_output_tokens),
            heartbeat_timeout=LLM_HEARTBEAT_TIMEOUT,
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=200), maximum_attempts=3
            ),
        )
        return result


class FlakyMessages(Messages):
    """Real messages whose first insert of an assistant reply fails (an outage)."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.assistant_inserts = 0

    def add_message(self, *args: Any, **kwargs: Any) -> bool:
        if "assistant" in args:
            self.assistant_inserts += 1
            if self.assistant_inserts == 1:
                raise OSError("store unavailable")
        return super().add_message(*args, **kwargs)


async def _open_run(store: Store) -> None:
    trigger = Trigger(seq=1, kind=TriggerKind.HUMAN_MESSAGE, received_at=NOW, text="status?")
    inp = RunInput(agent_id=AGENT, run=1, session=1, triggers=[trigger], config=AgentConfig())
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, started_time=NOW)
    await env.run(
        RunLogActivities(store).load_context, LoadContextRequest(run_input=inp, started_at=NOW)
    )


async def check_store_failure_after_the_answer(
    client: Client, tmp_path: Path, fake: FakeAnthropic
) -> None:
    fake.set_responder(lambda req: Reply(text=ANSWER, tool_calls=[("get_fleet_status", {})]))
    store = Store(f"sqlite:///{tmp_path / 'fleet.db'}")
    store.messages = flaky = FlakyMessages(store)
    store.create_all()
    await _open_run(store)
    task_queue = f"llm-reuse-{uuid.uuid4().hex[:8]}"
    provider = AnthropicProvider()  # the fake_llm fixture points the SDK at the fake
    try:
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[CallLlmOnce],
            activities=[LlmActivities(store, provider).call_llm],
        ):
            handle = await client.start_workflow(
                CallLlmOnce.run,
                LlmRequest(agent_id=AGENT, run=1, session=1, round=1, config=AgentConfig()),
                id=f"llm-reuse-{uuid.uuid4().hex[:8]}",
                task_queue=task_queue,
            )
            result = await handle.result()
            history = await handle.fetch_history()
        assert len(fake.requests) == 1, "the model was asked once and paid once"
        assert flaky.assistant_inserts == 2, "the first store write failed, the retry stored"
        started = [
            e.activity_task_started_event_attributes
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        ]
        assert [s.attempt for s in started] == [2], "Temporal retried the activity"
        row = store.messages.get_message(AGENT, 1, 1)
        assert row is not None
        stored = StoredReply.model_validate_json(row.content)
        # Sonnet 5.5 sends the text beside a tool call in a thinking block:
        # shown, as the config's display is "summarized".
        assert reply_text(stored.content) == ""
        assert ANSWER in [b.get("thinking") for b in stored.content]
        assert result.replayed, "attempt 2 took the reply from the heartbeat details"
        assert [c.id for c in result.tool_calls] == [
            b["id"] for b in stored.content if b["type"] == "tool_use"
        ], "the stored reply is the one the model gave (tool_use ids are random)"
        # Its thinking came through the heartbeat details byte for byte: the
        # next round can send it back as the API checks it.
        assert stored.content == fake.requests[0].content
        assert stored.content[0]["type"] == "thinking" and stored.content[0]["signature"]
    finally:
        await provider.aclose()
        store.dispose()


async def test_store_failure_after_the_answer_reuses_it_on_the_test_server(
    ts_env: WorkflowEnvironment, tmp_path: Path, fake_llm: FakeAnthropic
) -> None:
    await check_store_failure_after_the_answer(ts_env.client, tmp_path, fake_llm)


@pytest.mark.devserver
async def test_store_failure_after_the_answer_reuses_it_on_the_dev_server(
    dev_env: WorkflowEnvironment, tmp_path: Path, fake_llm: FakeAnthropic
) -> None:
    await check_store_failure_after_the_answer(dev_env.client, tmp_path, fake_llm)
