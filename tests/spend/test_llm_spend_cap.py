"""The LLM spend cap (`max_llm_usd_per_hour`): once the runs of the last hour
cost the cap, no run starts until the hour allows it; what arrives waits
(an operator's message, a trigger, a reset across a continue-as-new), the
operator is notified once, status says why, and a higher cap resumes at
once. The autopilot costs $0 and is never held. Real parts: the
time-skipping server, the fake Messages API over HTTP reporting the usage
each reply is priced by (record_run, the model table), a webhook receiver."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.llm.model_table import KNOWN_MODELS, cost_usd
from fleet_agent.models import AgentStatus, Phase, TokenUsage, TriggerKind
from fleet_agent.notify.settings import NotifyEnv
from fleet_agent.store import Store
from starter.agent_client import AgentClient
from starter.cli import agent_commands as commands
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from testkit.notify_receivers import WebhookReceiver
from tests.helpers import (
    eventually,
    finished_runs,
    replay_agent_chain,
    running_worker,
    status,
    status_after,
    wait_runs,
)
from workflows import FleetAgentWorkflow

DONE = 'Looked.\n<verdict>{"action": false, "state_changed": true}</verdict>'
#: What each of the first two runs' one reply reports: about $0.50 at Sonnet 5.5's prices.
COSTLY = (200_000, 10_000)
RUN_USD = cost_usd(
    TokenUsage(input_tokens=COSTLY[0], output_tokens=COSTLY[1]), KNOWN_MODELS["claude-sonnet-5-5"]
)
#: Two such runs pass it, one does not.
CAP = round(RUN_USD * 1.5, 4)
AGENT: dict[str, Any] = {"heartbeat_seconds": 36_000, "max_llm_usd_per_hour": CAP}


def _costly_then_cheap(costly: int = 2) -> Callable[[Request], Reply]:
    calls = [0]

    def respond(req: Request) -> Reply:
        calls[0] += 1
        return Reply(text=DONE, usage=COSTLY if calls[0] <= costly else (1_000, 100))

    return respond


async def _two_costly_runs(ts_env: WorkflowEnvironment, store: Store, handle: Any) -> AgentStatus:
    await ts_env.sleep(11)  # the start-up window: run 1
    await wait_runs(store, handle.id, 1)
    await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "look again"})
    await wait_runs(store, handle.id, 2)
    return await status_after(handle, 2)


def _titles(hook: WebhookReceiver) -> list[str]:
    return [str(p.body.get("title")) for p in hook.posts]


async def test_past_the_cap_runs_wait_for_the_hour_lose_nothing_and_notify_once(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(_costly_then_cheap())
    with WebhookReceiver() as hook:
        env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": hook.url()})
        async with running_worker(ts_env.client, store, notify=env) as h:
            handle = await h.start_agent(**AGENT)
            st = await _two_costly_runs(ts_env, store, handle)
            runs = finished_runs(store, handle.id)
            assert [r.cost_usd for r in runs] == pytest.approx([RUN_USD, RUN_USD])
            assert st.llm_spend is not None
            assert st.llm_spend.last_hour_usd == pytest.approx(2 * RUN_USD)
            assert st.llm_spend.held_until is not None

            await handle.signal(FleetAgentWorkflow.human_message, {"text": "how is it going?"})
            await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "and now?"})
            await ts_env.sleep(30)  # well past the P0 window

            async def held() -> AgentStatus | None:
                now = await status(handle)
                p = now.llm_spend
                return now if p is not None and p.held_since is not None else None

            holding = await eventually(held, what="the runs held")
            assert holding is not None
            st = holding
            assert st.phase == Phase.IDLE and st.current_run is None
            assert {t.kind for t in st.pending_triggers} == {
                TriggerKind.HUMAN_MESSAGE,
                TriggerKind.TRIGGER_NOW,
            }
            assert st.llm_spend is not None and st.llm_spend.held_until is not None
            # It waits until run 1's cost is an hour old: run 2's alone is under the cap.
            release = st.llm_spend.held_until
            first_end = runs[0].ended_at
            assert first_end is not None
            assert timedelta(0) <= release - (first_end + timedelta(hours=1)) < timedelta(seconds=5)
            assert st.next_run_due_at == release
            assert len(finished_runs(store, handle.id)) == 2 and len(fake_llm.requests) == 2

            async def told() -> list[str]:
                return [t for t in _titles(hook) if "LLM spend cap" in t]

            await eventually(told, what="the hold notified")
            body = next(p.body for p in hook.posts if "LLM spend cap" in str(p.body.get("title")))
            assert "max_llm_usd_per_hour" in body["message"] and f"${CAP:.2f}" in body["message"]

            # The hour allows it: one run takes both, the message answered.
            await ts_env.sleep(3600)
            third = (await wait_runs(store, handle.id, 3))[2]
            assert {t.kind for t in third.triggers} == {
                TriggerKind.HUMAN_MESSAGE,
                TriggerKind.TRIGGER_NOW,
            }
            st = await status_after(handle, 3)
            assert st.llm_spend is not None and st.llm_spend.held_until is None
            assert st.llm_spend.held_since is None
            assert sum("LLM spend cap" in t for t in _titles(hook)) == 1, _titles(hook)
            assert await replay_agent_chain(ts_env.client, handle) == 1


async def test_a_hold_survives_a_continue_as_new_and_a_higher_cap_resumes_at_once(
    ts_env: WorkflowEnvironment,
    store: Store,
    fake_llm: FakeAnthropic,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_llm.set_responder(_costly_then_cheap())
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(**AGENT)
        await _two_costly_runs(ts_env, store, handle)
        await handle.signal(FleetAgentWorkflow.human_message, {"text": "still there?"})
        first_run_id = (await handle.describe()).run_id
        await handle.signal(FleetAgentWorkflow.reset_session, {"reason": "fresh start"})

        # No query while the continue-as-new is in flight (the time-skipping
        # server can leave it hanging): describe reads the server only.
        async def continued() -> bool:
            return (await handle.describe()).run_id != first_run_id

        await eventually(continued, what="the reset's continue-as-new")
        await ts_env.sleep(30)
        st = await status(handle)
        assert st.executions == 2 and st.session == 2
        assert st.llm_spend is not None and st.llm_spend.held_until is not None
        assert {t.kind for t in st.pending_triggers} == {
            TriggerKind.HUMAN_MESSAGE,
            TriggerKind.SESSION_RESET,
        }
        assert len(finished_runs(store, handle.id)) == 2
        # The operator who writes now is told why the answer waits.
        agent = AgentClient(ts_env.client, handle.id, task_queue=h.task_queue)
        assert await commands.say(agent, "anyone there?", "alice") == 0
        said = capsys.readouterr().out
        assert "message sent" in said and "held by the LLM spend cap until" in said
        assert f"{st.llm_spend.held_until:%Y-%m-%d %H:%M:%S}Z" in said

        await handle.execute_update(
            FleetAgentWorkflow.update_config, {"max_llm_usd_per_hour": CAP * 10}
        )
        third = (await wait_runs(store, handle.id, 3))[2]
        assert third.session == 2
        assert TriggerKind.HUMAN_MESSAGE in {t.kind for t in third.triggers}
        # Within seconds of the update, not an hour after run 1.
        assert third.started_at - third.triggers[0].received_at < timedelta(minutes=5)


async def test_the_autopilot_costs_nothing_and_is_never_held(
    ts_env: WorkflowEnvironment, store: Store
) -> None:
    async with running_worker(ts_env.client, store, provider=AutopilotProvider()) as h:
        handle = await h.start_agent(heartbeat_seconds=36_000, max_llm_usd_per_hour=0.0001)
        await ts_env.sleep(11)
        for n in range(2, 5):
            await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": f"again {n}"})
            await ts_env.sleep(3)
            await wait_runs(store, handle.id, n)
        st = await status_after(handle, 4)
        assert st.llm_spend is not None
        assert st.llm_spend.last_hour_usd == 0 and st.llm_spend.held_until is None
