"""Accounting: each round priced from the price table, each run's cost and
tools' seconds recorded, sums per session, per day and over 24 h; through the
loop, the sums equal the usage the fake Messages API reported."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.llm.model_table import KNOWN_MODELS, model_table
from fleet_agent.llm.transcript import StoredReply
from fleet_agent.models import AgentState, AgentStatus, Phase, TokenUsage
from fleet_agent.store import Store
from fleet_agent.store.accounting import price_of, replies_cost
from fleet_agent.visibility.details import agent_details
from starter.views.render import status_text
from starter.views.runlog import run_detail, runs_table
from testkit.fakes.anthropic_server import FakeAnthropic
from tests.helpers import eventually, finish_ok, running_worker, wait_runs
from tests.helpers import status as status_of
from tests.helpers.prompt_caching import reported, respond
from tests.helpers.store_backends import Backend, backend
from workflows import FleetAgentWorkflow

__all__ = ["backend"]  # the fixture, imported for pytest

AGENT = "acct"
USAGE = TokenUsage(
    input_tokens=1_000,
    output_tokens=200,
    cache_read_input_tokens=10_000,
    cache_creation_input_tokens=3_000,
    cache_creation_1h_input_tokens=2_000,
)


def test_a_round_costs_its_usage_at_its_models_list_prices() -> None:
    # Sonnet 5.5: $2 in, $10 out, 5-minute writes 1.25 ×, 1-hour 2 ×, reads $0.10.
    expected = (1_000 * 2 + 200 * 10 + 1_000 * 2.5 + 2_000 * 4 + 10_000 * 0.1) / 1e6
    reply = StoredReply(content=[], stop_reason="end_turn", usage=USAGE, model="claude-sonnet-5-5")
    assert replies_cost([reply], KNOWN_MODELS) == pytest.approx(expected)
    assert replies_cost([reply, reply], KNOWN_MODELS) == pytest.approx(2 * expected)


def test_dated_model_ids_priced_by_their_alias_unknown_ones_free_overrides_applied() -> None:
    assert price_of("claude-sonnet-5-5-20260101", KNOWN_MODELS) == KNOWN_MODELS["claude-sonnet-5-5"]
    assert price_of("autopilot-1", KNOWN_MODELS) is None
    free = StoredReply(content=[], stop_reason="end_turn", usage=USAGE, model="autopilot-1")
    assert replies_cost([free], KNOWN_MODELS) == 0.0
    table = model_table('{"claude-sonnet-5-5": {"cache_read": 0.0, "output": 20.0}}')
    reply = free.model_copy(update={"model": "claude-sonnet-5-5"})
    expected = (1_000 * 2 + 200 * 20 + 1_000 * 2.5 + 2_000 * 4) / 1e6
    assert replies_cost([reply], table) == pytest.approx(expected)


def _run(
    store: Store,
    run: int,
    started: datetime,
    *,
    session: int = 1,
    wf: str = "wf-1",
    cost: float = 0.0,
    usage: TokenUsage = USAGE,
) -> None:
    store.sessions.ensure_session(AGENT, session, "", started)
    store.run_writes.begin_run(AGENT, run, session, [], "", started, wf)
    finish_ok(
        store,
        AGENT,
        run,
        started + timedelta(seconds=30),
        tool_calls=1,
        usage=usage,
        llm_seconds=1.5,
        workflow_run_id=wf,
        cost_usd=cost,
        tool_seconds=0.25,
        model="claude-sonnet-5-5",
    )


def test_totals_per_day_24h_and_session_count_each_run_once(backend: Backend) -> None:
    # Both databases: the sums are one SQL aggregate (fleet_agent/store/run_costs.py).
    store = backend.store()
    store.create_all()
    now = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    _run(store, 1, now - timedelta(hours=30), cost=1.0)  # outside both windows
    _run(store, 2, now - timedelta(hours=12), cost=0.5)  # yesterday, in the 24 h
    _run(store, 3, now - timedelta(hours=2), cost=0.25, session=2)
    # Run 3 executed again after a reset: its replies are shared, so only
    # the latest attempt counts (not 0.25 + 0.3).
    _run(store, 3, now - timedelta(hours=2), cost=0.3, session=2, wf="wf-2")
    _run(store, 4, now - timedelta(minutes=5), cost=0.125, session=2)
    store.run_writes.begin_run(AGENT, 5, 2, [], "", now, "wf-1")  # still running: not counted

    summary = store.run_costs.llm_cost_summary(AGENT, now)
    assert summary.as_of == now
    assert summary.today.runs == 2 and summary.today.cost_usd == pytest.approx(0.425)
    assert summary.last_24h.runs == 3 and summary.last_24h.cost_usd == pytest.approx(0.925)
    assert summary.today.usage == USAGE + USAGE
    assert summary.today.llm_seconds == pytest.approx(3.0)
    assert summary.today.tool_seconds == pytest.approx(0.5)
    assert summary.today.cached_share == pytest.approx(10_000 / 14_000)
    session = store.run_costs.llm_totals(AGENT, session=2)
    assert session.runs == 2 and session.cost_usd == pytest.approx(0.425)
    assert store.run_costs.llm_totals(AGENT).runs == 4
    record = store.run_reads.get_run(AGENT, 3)
    assert record is not None
    assert (record.attempt, record.cost_usd, record.model) == (2, 0.3, "claude-sonnet-5-5")
    assert record.tool_seconds == 0.25
    assert "LLM: today $0.42 (2 run(s), 71% of the prompt cached" in summary.line()


async def test_run_and_day_sums_match_the_usage_the_fake_api_reported(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, fleet: FleetActivities
) -> None:
    fake_llm.set_responder(respond)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await h.start_agent(monitor_enabled=False)
        await ts_env.sleep(11)  # the start-up window
        await wait_runs(store, handle.id, 1)
        for n, text in ((2, "How is the fleet doing today?"), (3, "Any machine to release?")):
            await handle.signal(FleetAgentWorkflow.human_message, {"text": text})
            await wait_runs(store, handle.id, n)

        async def run_3_applied() -> AgentStatus | None:
            st = await status_of(handle)
            return st if st.last_run is not None and st.last_run.run == 3 else None

        found = await eventually(run_3_applied, what="the agent to apply run 3's result")
    assert found is not None
    status = found
    runs = await wait_runs(store, handle.id, 3)

    # Requests in order: run 1 rounds 1 and 2 (a tool call), run 2, run 3.
    requests = fake_llm.requests
    assert len(requests) == 4
    assert {r.model for r in requests} == {"claude-sonnet-5-5"}
    by_run = [requests[:2], requests[2:3], requests[3:]]
    for record, reqs in zip(runs, by_run, strict=True):
        usage = sum((reported(r) for r in reqs), TokenUsage())
        assert record.usage == usage
        cost = sum(
            replies_cost(
                [StoredReply(content=[], stop_reason="", usage=reported(r), model=r.model)],
                KNOWN_MODELS,
            )
            for r in reqs
        )
        assert record.cost_usd == pytest.approx(cost)
        assert record.cost_usd > 0 and record.model == "claude-sonnet-5-5"
    assert runs[0].tool_seconds >= 0 and runs[1].tool_seconds == 0

    total = sum((reported(r) for r in requests), TokenUsage())
    day = store.run_costs.llm_totals(handle.id, since=runs[0].started_at)
    assert (day.runs, day.usage) == (3, total)
    assert day.cost_usd == pytest.approx(sum(r.cost_usd for r in runs))
    assert day.llm_seconds == pytest.approx(sum(r.llm_seconds for r in runs))

    # The status shows what run 3's load_context read: runs 1 and 2.
    shown = status.llm_cost
    assert shown is not None and shown.as_of == runs[2].started_at
    assert shown.last_24h.runs == 2
    assert shown.last_24h.cost_usd == pytest.approx(runs[0].cost_usd + runs[1].cost_usd)
    assert shown.last_24h.usage == runs[0].usage + runs[1].usage

    # Where an operator reads them: status, the Web UI details, runs, show-run.
    text = status_text(status, datetime.now(UTC))
    assert f"LLM cost:       today ${shown.today.cost_usd:.2f}" in text or (
        runs[0].started_at.date() != runs[2].started_at.date()
    )
    assert "when the last run read it" in text
    # Thinking is output: counted in it, and said apart.
    thinking = shown.today.usage.thinking_tokens
    assert thinking > 0 or runs[0].started_at.date() != runs[2].started_at.date()
    assert f"({thinking:,} thinking)" in text or not thinking
    assert "LLM:            effort medium · thinking summarized · 4,096 output tokens" in text
    details = agent_details(AgentState(llm_cost=shown), Phase.IDLE, None, None)
    assert details.endswith(shown.line())
    table = runs_table(runs)
    assert "COST" in table and f"${runs[0].cost_usd:.4f}" in table
    detail = run_detail(runs[0], store.messages.run_messages(handle.id, 1))
    assert f"LLM cost:  ${runs[0].cost_usd:.4f} (claude-sonnet-5-5)" in detail
    assert detail.count("; $") == 2  # each of run 1's two rounds, priced
