"""The agent's `ask` update (workflows/agent_ask.py) on the time-skipping test
server, with the real anthropic client talking to a local Messages API.

An ask is a `human_message` that waits: it returns the answer of the run that
took the message (cut at ASK_ANSWER_CHARS), refuses at once what no run
would answer (frozen, paused, a full backlog), and says `pending` with the
run to follow when its wait ends first. The agent's continue-as-new waits
for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError, WorkflowUpdateStage
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import (
    ASK_ANSWER_CHARS,
    AskOutcome,
    AskResult,
    RunStatus,
    TriggerKind,
)
from fleet_agent.store import Store
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import eventually, finished_runs, running_worker, status, wait_runs
from workflows import FleetAgentWorkflow, agent_state

VERDICT = '\n<verdict>{"action": true, "state_changed": false}</verdict>'
LONG = "The fleet holds. " * 400  # 6,800 characters: more than an ask returns


def _answer(req: Request) -> Reply:
    text = req.last_user_text()
    if "long answer" in text:
        return Reply(text=LONG + VERDICT)
    if "slow" in text:
        return Reply(text="Slowly." + VERDICT, delay=4)
    return Reply(text="Nothing new." + VERDICT)


async def ask(handle: WorkflowHandle[FleetAgentWorkflow, None], arg: Any) -> AskResult:
    return await handle.execute_update(FleetAgentWorkflow.ask, arg)


async def test_ask_returns_the_answer_of_the_run_that_took_the_message(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(_answer)
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2)
        result = await ask(handle, {"text": "a long answer, please", "author": "ops"})
        assert result.outcome == AskOutcome.ANSWERED, result
        assert result.run is not None and result.run_status == RunStatus.OK
        assert result.verdict is not None and result.verdict.action
        assert result.answer == LONG.rstrip()[:ASK_ANSWER_CHARS] and result.answer_cut
        assert "<verdict>" not in result.answer
        assert f"show-run {result.run}" in result.follow
        # The run that answered is the one that took the message, once.
        runs = await wait_runs(store, handle.id, 1)
        took = [
            r.run
            for r in runs
            for t in r.triggers
            if t.kind == TriggerKind.HUMAN_MESSAGE and t.text == "a long answer, please"
        ]
        assert took == [result.run]
        record = next(r for r in finished_runs(store, handle.id) if r.run == result.run)
        assert result.cost_usd == pytest.approx(record.cost_usd)
        assert record.final_text.startswith(LONG.rstrip())
        # A bare string is a message too, and a short answer is whole.
        second = await ask(handle, "and now?")
        assert second.outcome == AskOutcome.ANSWERED and second.run is not None
        assert second.run > result.run
        assert (second.answer, second.answer_cut) == ("Nothing new.", False)


async def test_a_malformed_ask_is_refused_before_history(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2)
        for bad, why in (
            ({"text": "  "}, "text must not be blank"),
            ({"text": "hi", "wait_seconds": 0}, "wait_seconds"),
            ({"text": "hi", "wait_seconds": 99_999}, "wait_seconds"),
            ({"text": "hi", "colour": "red"}, "colour"),
            (42, "expected a JSON object or a string"),
        ):
            with pytest.raises(WorkflowUpdateFailedError) as refused:
                await ask(handle, bad)
            assert why in str(refused.value.cause), (bad, refused.value.cause)
        st = await status(handle)
        assert [t for t in st.pending_triggers if t.kind == TriggerKind.HUMAN_MESSAGE] == []


async def test_a_frozen_agent_refuses_an_ask_at_once(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2)
        # Accepted is enough: the freeze has taken effect (without fleet
        # activities its stop of the fleet only retries).
        await handle.start_update(
            FleetAgentWorkflow.freeze,
            {"reason": "maintenance"},
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        )
        result = await ask(handle, {"text": "are you there?", "wait_seconds": 5})
        assert result.outcome == AskOutcome.REFUSED and result.run is None
        assert "frozen (maintenance)" in result.reason and "unfreeze" in result.reason
        st = await status(handle)
        assert st.rejected[-1].signal == "ask" and "frozen" in st.rejected[-1].error
        assert [t for t in st.pending_triggers if t.kind == TriggerKind.HUMAN_MESSAGE] == []


async def test_a_paused_agent_or_a_full_backlog_refuses_an_ask(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    async with running_worker(ts_env.client, store) as h:
        paused = await h.start_agent(paused=True)
        result = await ask(paused, {"text": "hello?", "wait_seconds": 5})
        assert result.outcome == AskOutcome.REFUSED
        assert "paused" in result.reason and "say" in result.reason

        # Messages wait out a long P0 window until their texts fill the backlog.
        busy = await h.start_agent(p0_debounce_seconds=600, p1_debounce_seconds=600)
        text = "x" * 20_000
        for _ in range(14):
            await busy.signal(FleetAgentWorkflow.human_message, text)
        full = await ask(busy, {"text": text, "wait_seconds": 5})
        assert full.outcome == AskOutcome.REFUSED and "send this one again" in full.reason
        st = await status(busy)
        waiting = [t for t in st.pending_triggers if t.kind == TriggerKind.HUMAN_MESSAGE]
        assert len(waiting) == 14 and st.rejected[-1].signal == "ask"


async def test_an_ask_whose_wait_ends_first_is_pending_with_its_run(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(_answer)
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2)
        # The run takes the message and is still waiting for the model.
        result = await ask(handle, {"text": "a slow one", "wait_seconds": 2})
        assert result.outcome == AskOutcome.PENDING, result
        assert result.run is not None and f"run #{result.run} took the message" in result.reason
        assert f"{handle.id}/run-{result.run}" in result.follow
        # It is answered all the same, by that run.
        runs = await wait_runs(store, handle.id, 1)
        assert any(r.run == result.run and r.final_text.startswith("Slowly") for r in runs)

        # No run has taken it yet: pending without a run, and kept.
        waiting = await h.start_agent(p0_debounce_seconds=600, p1_debounce_seconds=600)
        early = await ask(waiting, {"text": "anyone?", "wait_seconds": 1})
        assert early.outcome == AskOutcome.PENDING and early.run is None
        assert "no run took the message within 1s" in early.reason
        st = await status(waiting)
        assert [t.text for t in st.pending_triggers if t.kind == TriggerKind.HUMAN_MESSAGE] == [
            "anyone?"
        ]


async def test_continue_as_new_waits_for_an_ask(
    ts_env: WorkflowEnvironment,
    store: Store,
    fake_llm: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent must continue as new while the run that took an asked
    message is in flight (here: too many signals in this execution). The
    handover waits for the ask, which gets its run's answer."""
    fake_llm.set_responder(_answer)
    # Pass-through module: the sandboxed workflow reads the same constant.
    monkeypatch.setattr(agent_state, "_MAX_SIGNALS_PER_EXECUTION", 30)
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(p0_debounce_seconds=0.2)
        asking = asyncio.create_task(ask(handle, {"text": "a slow one"}))

        async def running() -> bool:
            return (await status(handle)).current_run is not None

        await eventually(running, what="the run that took the message")
        for _ in range(30):
            await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "flood"})
        result = await asking
        assert result.outcome == AskOutcome.ANSWERED, result
        assert result.answer == "Slowly."

        async def continued() -> bool:
            return (await status(handle)).executions >= 2

        await eventually(continued, what="the agent to continue as new")
        # Between runs too: an execution that ends after each run answers first.
        await handle.execute_update(
            FleetAgentWorkflow.update_config, {"continue_as_new_after_runs": 1}
        )
        again = await ask(handle, "and now?")
        assert (again.outcome, again.answer) == (AskOutcome.ANSWERED, "Nothing new.")
