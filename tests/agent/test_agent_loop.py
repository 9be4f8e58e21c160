"""The agent loop on the time-skipping test server, with the real anthropic
client talking to a local Messages API server.

Each test owns a worker on a unique task queue, a fresh SQLite store and a
fresh agent ID. Timestamps asserted on are workflow time (the store records
`workflow.now()` of each run), so the figures are exact in simulated time.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import Phase, RunStatus, TriggerKind
from fleet_agent.store import RunRecord, Store
from starter.views.render import verdict_text
from testkit.fakes.anthropic_server import ErrorReply, FakeAnthropic, Reply, Request
from tests.helpers import (
    assert_sequential,
    finished_runs,
    message_after_a_reset,
    running_worker,
    status,
    status_after,
    status_between_runs,
    wait_runs,
)
from workflows import FleetAgentWorkflow


async def startup(env: WorkflowEnvironment, store: Store, agent_id: str) -> list[RunRecord]:
    """Skip the 10 s start-up window instead of waiting it out in real time."""
    await env.sleep(11)
    return await wait_runs(store, agent_id, 1)


NOOP = 'Nothing to do.\n<verdict>{"action": false, "state_changed": false}</verdict>'
ACTED = 'Done.\n<verdict>{"action": true, "state_changed": true}</verdict>'


async def test_first_run_after_start_and_human_message_answered(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=f"Hello operator.\n{ACTED[6:]}"))
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        await handle.signal(FleetAgentWorkflow.human_message, {"text": "are you there?"})
        runs = await wait_runs(store, handle.id, 1)
        first = runs[0]
        kinds = {t.kind for t in first.triggers}
        # The start trigger (P1, 10 s) and the message (P0, 2 s) go into one run.
        assert kinds == {TriggerKind.AGENT_STARTED, TriggerKind.HUMAN_MESSAGE}
        assert first.status == RunStatus.OK
        assert "are you there?" in fake_llm.requests[0].last_user_text()
        assert first.final_text.startswith("Hello operator.")
        st = await status_after(handle, 1)
        assert st.run_count == 1 and st.session == 1
        assert st.last_run is not None and st.last_run.run == 1
        assert st.phase in (Phase.IDLE, Phase.DEBOUNCING)


async def test_heartbeat_every_300s_over_six_simulated_hours(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        await startup(ts_env, store, handle.id)
        for _ in range(6):  # one RPC per simulated hour keeps each call short
            await ts_env.sleep(3600)
        # The last sleep can end during a heartbeat run: once it has ended,
        # nothing is due for 300 s of real time (the clock no longer skips).
        st = await status_between_runs(handle)
        runs = finished_runs(store, handle.id)
        heartbeats = [r for r in runs if r.triggers[0].kind == TriggerKind.HEARTBEAT]
        # A run is due 300 s after the previous one ended: 72 in 6 hours,
        # less the few seconds each run takes.
        print(f"simulated 6 h: {len(heartbeats)} heartbeat runs, {len(runs)} runs in all")
        assert 70 <= len(heartbeats) <= 72, len(heartbeats)
        gaps = [
            (b.started_at - a.ended_at).total_seconds()
            for a, b in itertools.pairwise(runs)
            if a.ended_at is not None
        ]
        # 300 s after the previous run ended, plus the real-time cost of
        # handing a finished child back to the parent (time does not skip
        # then; a loaded machine stretches it): never sooner, and no heartbeat
        # skipped. The count above bounds the gaps' mean.
        assert all(300 <= gap < 2 * 300 for gap in gaps), sorted(gaps)[:3] + sorted(gaps)[-3:]
        assert_sequential(runs)
        assert st.run_count == len(runs)
        # No-op heartbeats are kept for audit but never enter the prompt.
        assert all(r.noop and not r.in_prompt for r in heartbeats)
        assert "Nothing to do." not in fake_llm.requests[-1].all_text().split("## Triggers")[0]


def _scheduler(delay: float) -> object:
    """Run 1 schedules a wake; every later run is a no-op."""

    def respond(req: Request) -> Reply:
        if "agent started" in req.last_user_text().lower() and not req.tool_results():
            return Reply(
                tool_calls=[
                    ("schedule_next_check", {"delay_seconds": delay, "reason": "recheck loading"})
                ]
            )
        if req.tool_results():
            return Reply(text=f"Scheduled.\n{ACTED[6:]}")
        return Reply(text=NOOP)

    return respond


async def test_900s_wake_fires_once_and_is_gone(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(_scheduler(900))  # type: ignore[arg-type]
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(heartbeat_seconds=3600)
        await startup(ts_env, store, handle.id)
        st = await status_after(handle, 1)
        assert [w.reason for w in st.wakes] == ["recheck loading"]
        wake = st.wakes[0]
        assert wake.requested_by_run == 1
        await ts_env.sleep(2000)
        runs = finished_runs(store, handle.id)
        wake_runs = [r for r in runs if any(t.kind == TriggerKind.WAKE for t in r.triggers)]
        assert len(wake_runs) == 1
        fired = wake_runs[0]
        assert abs((fired.started_at - wake.due_at).total_seconds()) < 1
        assert "recheck loading" in fired.trigger_block
        assert (await status(handle)).wakes == []


@pytest.mark.parametrize("delay", [240, 300, 360])
async def test_wake_requests_near_the_heartbeat_are_noops(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, delay: int
) -> None:
    fake_llm.set_responder(_scheduler(delay))  # type: ignore[arg-type]
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        await startup(ts_env, store, handle.id)
        # Once the agent has taken in run 1 (a plain status could race it and
        # see no wake only because the run's result was not applied yet).
        st = await status_after(handle, 1)
        assert st.last_run is not None and st.last_run.status == RunStatus.OK
        assert st.wakes == []
        result = fake_llm.requests[1].tool_results()[0]
        assert "heartbeat already covers this" in str(result["content"])


async def test_reset_keeps_run_counter_and_agent_answers_after_it(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text=f"ANSWER-{len(fake_llm.requests)}\n{ACTED[6:]}"))
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        await handle.signal(FleetAgentWorkflow.human_message, "one")
        await startup(ts_env, store, handle.id)
        await handle.signal(FleetAgentWorkflow.human_message, "two")
        await wait_runs(store, handle.id, 2)
        assert "ANSWER-1" in fake_llm.requests[1].all_text()  # history works
        await handle.signal(FleetAgentWorkflow.reset_session, {"reason": "context too long"})
        # No query while the continue-as-new is in flight: the time-skipping
        # test server can leave such a query hanging and lock its clock.
        await message_after_a_reset(handle, "three")
        runs = await wait_runs(store, handle.id, 3)
        third = runs[2]
        assert third.run == 3 and third.session == 2
        kinds = {t.kind for t in third.triggers}
        assert TriggerKind.HUMAN_MESSAGE in kinds and TriggerKind.SESSION_RESET in kinds
        prompt = fake_llm.requests[-1].all_text()
        assert "three" in prompt
        assert "ANSWER-1" not in prompt and "ANSWER-2" not in prompt, "empty conversation"
        st = await status_after(handle, 3)
        assert st.run_count == 3 and st.session == 2 and st.executions == 2
        sessions = store.sessions.list_sessions(handle.id)
        assert [(s.session, s.reason) for s in sessions] == [
            (1, "agent started"),
            (2, "reset: context too long"),
        ]


async def test_prompt_has_only_final_messages_of_non_noop_runs(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    def respond(req: Request) -> Reply:
        text = req.last_user_text()
        if "alpha" in text and not req.tool_results():
            return Reply(
                text="THINKING-ALPHA",
                tool_calls=[("schedule_next_check", {"delay_seconds": 5000, "reason": "later"})],
            )
        if req.tool_results():
            return Reply(text=f"FINAL-ALPHA\n{ACTED[6:]}")
        if "beta" in text:
            return Reply(text="NOOP-BETA\n" + NOOP.split("\n")[1])
        return Reply(text=NOOP)

    fake_llm.set_responder(respond)
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        await startup(ts_env, store, handle.id)
        await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "alpha"})
        await wait_runs(store, handle.id, 2)
        await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "beta"})
        await wait_runs(store, handle.id, 3)
        await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "gamma"})
        runs = await wait_runs(store, handle.id, 4)
        assert runs[2].noop and not runs[2].in_prompt
        prompt = fake_llm.requests[-1].all_text()
        assert "FINAL-ALPHA" in prompt
        assert "THINKING-ALPHA" not in prompt, "intermediate messages stay in the store"
        assert "NOOP-BETA" not in prompt and "beta" not in prompt, "no-op runs left out"
        assert "Scheduled wake" not in prompt, "tool traffic stays in the store"
        # ...but the store kept all of it for audit.
        kinds = [m.kind for m in store.messages.run_messages(handle.id, 2)]
        assert kinds == ["context", "assistant", "tool_results", "assistant"]


async def test_missing_verdict_keeps_run_in_prompt_and_flags_it(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text="I forgot the tag."))
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        runs = await startup(ts_env, store, handle.id)
        run = runs[0]
        assert run.status == RunStatus.OK
        assert run.verdict_error == "no <verdict> tag in the final message"
        # Shown as missing, never invented; the loop treats the run as acting.
        assert run.verdict is None
        assert run.in_prompt and not run.noop
        st = await status_after(handle, 1)
        assert st.last_run is not None and st.last_run.verdict_error
        assert st.last_run.verdict is None
        assert verdict_text(run.verdict, run.verdict_error).startswith("no verdict")


async def test_llm_400_fails_the_run_and_the_next_trigger_still_runs(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.fail_next(400, message="messages: bad")
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        runs = await startup(ts_env, store, handle.id)
        assert runs[0].status == RunStatus.FAILED
        assert "400" in runs[0].error and "messages: bad" in runs[0].error
        assert len(fake_llm.requests) == 1, "a 400 is not retried"
        await handle.signal(FleetAgentWorkflow.human_message, "still there?")
        runs = await wait_runs(store, handle.id, 2)
        assert runs[1].status == RunStatus.OK
        st = await status_after(handle, 2)
        assert st.last_run is not None and st.last_run.status == RunStatus.OK


async def test_llm_overload_is_retried_by_temporal(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.fail_next(529, times=2)
    fake_llm.fail_next(429, headers={"retry-after": "3"})
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        # The start-up window and the retries' backoff (2 s, 4 s, then the
        # 429's retry-after of 3 s) in workflow time, not waited out for real.
        await ts_env.sleep(30)
        runs = await wait_runs(store, handle.id, 1, timeout=90)
        assert runs[0].status == RunStatus.OK
        assert len(fake_llm.requests) == 4
        assert len(store.messages.run_messages(handle.id, 1)) == 2, "one stored reply, no duplicate"


async def test_bad_signals_and_updates_are_rejected_and_the_loop_goes_on(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent()
        await handle.signal(FleetAgentWorkflow.human_message, {"txt": "typo"})
        await handle.signal(FleetAgentWorkflow.human_message, {"text": "   "})
        await handle.signal(FleetAgentWorkflow.state_changed, {"instance_id": "1"})
        await handle.signal(FleetAgentWorkflow.cancel_wake, {"wake_id": "w-nope"})
        with pytest.raises(WorkflowUpdateFailedError) as err:
            await handle.execute_update(FleetAgentWorkflow.update_config, {"heartbeat_seconds": 5})
        assert "heartbeat_seconds" in str(err.value.cause)
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update(FleetAgentWorkflow.update_config, {"no_such": 1})
        with pytest.raises(WorkflowUpdateFailedError) as err:
            await handle.execute_update(FleetAgentWorkflow.update_config, {"llm_effort": "huge"})
        assert "llm_effort" in str(err.value.cause) and "'low'" in str(err.value.cause)
        st = await status(handle)
        assert st.config.llm_effort == "medium", "unchanged"
        assert [r.signal for r in st.rejected] == [
            "human_message",
            "human_message",
            "state_changed",
            "cancel_wake",
        ]
        assert "text" in st.rejected[0].error
        assert st.config.heartbeat_seconds == 300
        new = await handle.execute_update(
            FleetAgentWorkflow.update_config, {"target_proofs_per_hour": 500, "llm_effort": "low"}
        )
        assert new.target_proofs_per_hour == 500
        assert (await status(handle)).config.llm_effort == "low", "status shows it"
        runs = await startup(ts_env, store, handle.id)
        kinds = {t.kind for t in runs[0].triggers}
        assert TriggerKind.CONFIG_CHANGED in kinds
        assert "500" in runs[0].trigger_block


async def test_paused_agent_holds_triggers_until_resumed(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(paused=True)
        await handle.signal(FleetAgentWorkflow.human_message, "hello?")
        await ts_env.sleep(3600)
        st = await status(handle)
        assert st.phase == Phase.PAUSED and st.run_count == 0
        assert len(st.pending_triggers) == 2
        await handle.execute_update(FleetAgentWorkflow.update_config, {"paused": False})
        runs = await startup(ts_env, store, handle.id)
        assert {t.kind for t in runs[0].triggers} == {
            TriggerKind.AGENT_STARTED,
            TriggerKind.HUMAN_MESSAGE,
        }


async def test_restarted_agent_never_reuses_run_numbers(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    client: Client = ts_env.client
    async with running_worker(client, store) as h:
        handle = await h.start_agent()
        await startup(ts_env, store, handle.id)
        await handle.terminate("operator terminated it")
        again = await h.start_agent(agent_id=handle.id)
        await ts_env.sleep(11)  # its start-up window
        runs = await wait_runs(store, handle.id, 2, timeout=60)
        assert [r.run for r in runs] == [1, 2]
        assert (await status(again)).run_count == 2


_ = timedelta, ErrorReply
