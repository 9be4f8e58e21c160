"""Every stop reason of the Messages API, handled by a run as the API documents it.

Time-skipping server, the real anthropic client streaming from the fake
Messages API, which scripts each reply's stop reason.
"""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from fleet_agent.llm.transcript import PAUSED_TEXT
from fleet_agent.models import AgentStatus, RunStatus
from fleet_agent.store import RunRecord, Store
from starter.views.runlog import run_detail, runs_table
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
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


async def test_a_paused_turn_is_continued_by_sending_it_back_with_a_note(
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
    continued = fake_llm.requests[1].plain_messages
    assert [m["role"] for m in continued] == ["user", "assistant", "user"]
    assert continued[1]["content"][-1] == {"type": "text", "text": "Let me think about the fleet"}
    # Never as the last message: Sonnet 5.5 refuses a prefill.
    assert continued[-1]["content"] == PAUSED_TEXT


CANCEL = ("cancel_wake", {"wake_id": "w-none"})


async def test_a_reply_that_fills_the_window_folds_the_run_and_is_asked_again(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """`model_context_window_exceeded` is its own case, not a truncation: the
    run so far becomes a digest in its context (no thinking block of it is
    left to echo), its cut calls do not run, and the model is asked again."""

    def respond(req: Request) -> Reply:
        n = len(fake_llm.requests)
        if n == 1:
            return Reply(text="Looking.", tool_calls=[CANCEL])
        if n == 2:
            return Reply(tool_calls=[WAKE], stop_reason="model_context_window_exceeded")
        return Reply(text=ACTED)

    fake_llm.set_responder(respond)
    run, st = await one_run(ts_env, store)
    assert run.status == RunStatus.OK, run.error
    assert run.stop_reasons == ["tool_use", "model_context_window_exceeded", "end_turn"]
    assert st.wakes == [], "the cut call never ran"
    again = fake_llm.requests[2].plain_messages
    assert [m["role"] for m in again] == ["user"], "every round of the run is in the digest"
    digest = again[0]["content"][-1]["text"]
    assert '- round 1: cancel_wake({"wake_id":"w-none"}) → error: ' in digest
    assert "- round 2: schedule_next_check(" in digest and "→ not run" in digest
    assert "your reply was cut off (model_context_window_exceeded)" in digest


async def test_a_window_filled_twice_ends_the_run_saying_what_to_change(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(lambda req: Reply(text="x", stop_reason="model_context_window_exceeded"))
    run, _ = await one_run(ts_env, store)
    assert run.status == RunStatus.FAILED
    assert "filled the model's context window again" in run.error
    assert "history_token_budget" in run.error and "max_output_tokens" in run.error
    assert len(fake_llm.requests) == 2
