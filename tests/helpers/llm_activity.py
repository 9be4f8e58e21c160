"""The call_llm activity's rig: the activities of one worker in an
ActivityEnvironment, a real Store, and the real AnthropicProvider talking to
the fake Messages API (tests/conftest.py's `fake_llm`); helpers to open a run,
call the model, store tool results and record the run; and a responder whose
reply depends on the run's message (alpha, beta, gamma). Import `rig` into a
test module."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from activities.llm import LlmActivities
from activities.runlog import RunLogActivities
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.models import (
    AgentConfig,
    LlmRequest,
    LlmResult,
    LoadContextRequest,
    RecordRunRequest,
    RunInput,
    RunResult,
    StoreToolResults,
    ToolResult,
    Trigger,
    TriggerKind,
)
from fleet_agent.store import Store
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request

AGENT = "agent-llm"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CONFIG = AgentConfig()
VERDICT_ACTED = '<verdict>{"action": true, "state_changed": true}</verdict>'
VERDICT_NOOP = '<verdict>{"action": false, "state_changed": false}</verdict>'


class Rig:
    """The activities of one worker, and helpers to drive a run through them."""

    def __init__(self, store: Store, fake: FakeAnthropic) -> None:
        self.store = store
        self.fake = fake
        self.env = ActivityEnvironment()
        self.env.info = dataclasses.replace(self.env.info, started_time=NOW)
        self.runlog = RunLogActivities(store)
        self.llm = LlmActivities(store, AnthropicProvider())  # env points it at the fake

    async def open_run(self, run: int, text: str, *, session: int = 1) -> None:
        trigger = Trigger(seq=run, kind=TriggerKind.HUMAN_MESSAGE, received_at=NOW, text=text)
        inp = RunInput(agent_id=AGENT, run=run, session=session, triggers=[trigger], config=CONFIG)
        start = NOW + timedelta(minutes=run)
        await self.env.run(
            self.runlog.load_context, LoadContextRequest(run_input=inp, started_at=start)
        )

    async def call(self, run: int, rnd: int, *, session: int = 1) -> LlmResult:
        req = LlmRequest(agent_id=AGENT, run=run, session=session, round=rnd, config=CONFIG)
        return await self.env.run(self.llm.call_llm, req)

    async def store_results(self, run: int, rnd: int, results: list[ToolResult]) -> None:
        req = StoreToolResults(agent_id=AGENT, run=run, round=rnd, results=results)
        await self.env.run(self.runlog.store_tool_results, req)

    async def record(self, result: RunResult, final_round: int | None, session: int = 1) -> None:
        result.ended_at = NOW + timedelta(minutes=result.run, seconds=30)
        req = RecordRunRequest(
            agent_id=AGENT, session=session, result=result, final_round=final_round
        )
        await self.env.run(self.runlog.record_run, req)

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order."""
        queue = list(replies)
        self.fake.set_responder(lambda req: queue.pop(0))


@pytest.fixture
def rig(store: Store, fake_llm: FakeAnthropic) -> Iterator[Rig]:
    yield Rig(store, fake_llm)


def _results_for(result: LlmResult, content: str = "ok") -> list[ToolResult]:
    return [
        ToolResult(tool_use_id=c.id, name=c.name, content=f"{content} {c.name}")
        for c in result.tool_calls
    ]


def _by_text(req: Request) -> Reply:
    text = req.last_user_text()
    if "alpha" in text and not req.tool_results():
        return Reply(
            text="THINKING-ALPHA",
            tool_calls=[("schedule_next_check", {"delay_seconds": 900, "reason": "r"})],
        )
    if req.tool_results():
        return Reply(text=f"FINAL-ALPHA\n{VERDICT_ACTED}")
    if "beta" in text:
        return Reply(text=f"NOOP-BETA\n{VERDICT_NOOP}")
    if "gamma" in text:
        return Reply(text="FAILED-GAMMA-PARTIAL", tool_calls=[("get_fleet_status", {})])
    return Reply(text=f"FINAL-OTHER\n{VERDICT_ACTED}")
