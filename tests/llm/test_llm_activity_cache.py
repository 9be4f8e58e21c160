"""The call_llm activity and prompt caching (tests/helpers/llm_activity.py): cache
reads from the second round and on the next runs."""

from __future__ import annotations

from activities.llm import LlmActivities
from fleet_agent.llm.anthropic_provider import AnthropicProvider
from fleet_agent.llm.tools import FLEET_TOOLS, LOCAL_TOOLS
from fleet_agent.llm.transcript import StoredReply
from fleet_agent.models import RunResult, RunStatus, TokenUsage
from testkit.fakes.anthropic_cache import cache_markers
from testkit.fakes.anthropic_server import Request
from tests.helpers.llm_activity import AGENT, Rig, _by_text, _results_for, rig

__all__ = ["rig"]  # the fixture, imported for pytest


def _reported(req: Request) -> TokenUsage:
    """The usage the fake answered `req` with, as the provider maps it."""
    usage = req.usage
    assert usage is not None
    return TokenUsage(
        input_tokens=usage["input_tokens"],
        output_tokens=usage["output_tokens"],
        cache_read_input_tokens=usage.get("cache_read_input_tokens", 0),
        cache_creation_input_tokens=usage.get("cache_creation_input_tokens", 0),
        cache_creation_1h_input_tokens=usage.get("cache_creation", {}).get(
            "ephemeral_1h_input_tokens", 0
        ),
        thinking_tokens=usage.get("output_tokens_details", {}).get("thinking_tokens", 0),
    )


async def test_cache_reads_from_the_second_round_and_on_the_next_runs(rig: Rig) -> None:
    # The worker's tool set: with the fleet tools, tools + system pass the
    # model's 1,024-token minimum by themselves (breakpoint A).
    rig.llm = LlmActivities(rig.store, AnthropicProvider(), LOCAL_TOOLS | FLEET_TOOLS)
    rig.fake.set_responder(_by_text)
    await rig.open_run(1, "alpha")
    r1 = await rig.call(1, 1)
    await rig.store_results(1, 1, _results_for(r1))
    r1b = await rig.call(1, 2)
    await rig.record(
        RunResult(run=1, status=RunStatus.OK, verdict=r1b.verdict, rounds=2, in_prompt=True),
        final_round=2,
    )
    for run in (2, 3):
        await rig.open_run(run, f"question {run}")
        answer = await rig.call(run, 1)
        await rig.record(
            RunResult(run=run, status=RunStatus.OK, verdict=answer.verdict, in_prompt=True), 1
        )
    first, second, run2, run3 = (_reported(r) for r in rig.fake.requests)
    # Round 1 of run 1: nothing to read; tools + system written for an hour,
    # the run's context for 5 minutes.
    assert first.cache_read_input_tokens == 0
    assert 1_024 <= first.cache_creation_1h_input_tokens < first.cache_creation_input_tokens
    # Round 2 reads everything round 1 wrote, and writes only the round.
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens < first.cache_creation_input_tokens
    # Run 2 reads tools + system; the history (run 1) is new: written for an hour.
    assert run2.cache_read_input_tokens == first.cache_creation_1h_input_tokens
    assert run2.cache_creation_1h_input_tokens > 0
    # Run 3 reads that too: tools, system and the history up to run 1.
    assert run3.cache_read_input_tokens == (
        run2.cache_read_input_tokens + run2.cache_creation_1h_input_tokens
    )
    assert all(len(cache_markers(req.body)) in (2, 3) for req in rig.fake.requests)
    # What the store keeps per round is what the API reported; per run, the sum.
    stored = {
        (m.run, m.round): StoredReply.model_validate_json(m.content).usage
        for run in (1, 2, 3)
        for m in rig.store.messages.run_messages(AGENT, run)
        if m.kind == "assistant"
    }
    assert stored == {(1, 1): first, (1, 2): second, (2, 1): run2, (3, 1): run3}
