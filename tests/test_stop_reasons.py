"""Every stop reason of the Messages API, handled by a run as the API documents it.

Time-skipping server, the real anthropic client streaming from the fake
Messages API, which scripts each reply's stop reason.
"""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from fleet_agent.models import AgentStatus, RunStatus
from fleet_agent.store import RunRecord, Store
from starter.runlog_view import run_detail, runs_table
from tests.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import running_worker, status_after, wait_runs

ACTED = 'Done.\n<verdict>{"action": true, "state_changed": true}</verdict>'
WAKE = ("schedule_next_check", {"delay_seconds": 5_000, "reason": "look again"})


async def one_run(env: WorkflowEnvironment, store: Store) -> tuple[RunRecord, AgentStatus]:
    """The start-up run, and the agent's status once it has taken it in."""
    async with running_worker(env.client, store) as h:
        handle = await h.start_agent(heartbeat_seconds=3600)
        await env.sleep(11)
        runs = await wait_runs(store, handle.id, 1)
        return runs[0], await status_after(handle, 1)


async def test_a_tool_call_cut_by_max_tokens_is_not_run_and_the_model_goes_on(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    def respond(req: Request) -> Reply:
        if not req.tool_results():
            # The reply ends inside the tool call's JSON: its input is partial.
            return Reply(text="Scheduling.", tool_calls=[WAKE], stop_reason="max_tokens")
        return Reply(text=ACTED)

    fake_llm.set_responder(respond)
    run, st = await one_run(ts_env, store)
    assert run.status == RunStatus.OK
    assert run.stop_reasons == ["max_tokens", "end_turn"]
    result = fake_llm.requests[1].tool_results()[0]
    assert result.get("is_error") is True
    assert "Not executed" in str(result["content"]) and "cut off" in str(result["content"])
    assert run.tool_calls == 0, "the cut call never ran"
    assert st.wakes == [], "no wake was scheduled from partial input"
    assert "[max_tokens]" in runs_table([run]), "the run log shows it"
    assert "stops:     max_tokens, end_turn" in run_detail(run, [])


async def test_a_reply_cut_twice_fails_the_run_with_a_clear_error(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(
        lambda req: Reply(text="A very long answer", tool_calls=[WAKE], stop_reason="max_tokens")
    )
    run, _ = await one_run(ts_env, store)
    assert run.status == RunStatus.FAILED
    assert "cut off again" in run.error and "max_output_tokens" in run.error
    assert run.stop_reasons == ["max_tokens", "max_tokens"]
    assert len(fake_llm.requests) == 2


async def test_a_text_reply_cut_by_max_tokens_is_asked_to_finish(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    def respond(req: Request) -> Reply:
        if len(fake_llm.requests) == 1:
            return Reply(text="The fleet is fine and I was about to", stop_reason="max_tokens")
        return Reply(text=f"...say so.\n{ACTED}")

    fake_llm.set_responder(respond)
    run, _ = await one_run(ts_env, store)
    assert run.status == RunStatus.OK and run.verdict is not None
    assert run.stop_reasons == ["max_tokens", "end_turn"]
    assert "cut off at the output token limit" in fake_llm.requests[1].last_user_text()


async def test_a_refusal_ends_the_run_without_acting(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(
        lambda req: Reply(text="I can't help", tool_calls=[WAKE], stop_reason="refusal")
    )
    run, _ = await one_run(ts_env, store)
    assert run.status == RunStatus.FAILED
    assert "declined" in run.error and run.stop_reasons == ["refusal"]
    assert "[refusal]" in runs_table([run])
    assert len(fake_llm.requests) == 1
    assert run.tool_calls == 0


async def test_a_paused_turn_is_continued_by_sending_it_back(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    def respond(req: Request) -> Reply:
        if len(fake_llm.requests) == 1:
            return Reply(text="Let me think about the fleet", stop_reason="pause_turn")
        return Reply(text=f" and it is fine.\n{ACTED}")

    fake_llm.set_responder(respond)
    run, _ = await one_run(ts_env, store)
    assert run.status == RunStatus.OK
    assert run.stop_reasons == ["pause_turn", "end_turn"]
    continued = fake_llm.requests[1].messages
    assert continued[-1]["role"] == "assistant", "the paused reply is sent back as the last turn"
