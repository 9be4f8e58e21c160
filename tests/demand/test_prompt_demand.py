"""The model's view of demand mode: a `## Demand` section after `## Target`
(who sets the target, the latest reading and its age, why, the events ahead),
read from the store by `load_context`; in fixed mode the message's bytes are
those of before demand mode."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from temporalio.testing import ActivityEnvironment

from activities.runlog import RunLogActivities
from fleet_agent.demand.forecast import DemandEvent
from fleet_agent.demand.point import DemandPoint
from fleet_agent.llm.prompt import context_message, system_prompt
from fleet_agent.llm.transcript import CONTEXT_SEQ
from fleet_agent.models import AgentConfig, LoadContextRequest, RunInput
from fleet_agent.store import DemandHistory, Store

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
DEMAND = AgentConfig(
    target_mode="demand",
    min_target=100,
    max_target=900,
    target_proofs_per_hour=400,
    demand_events=[
        # Ended before the run: not shown.
        DemandEvent(
            start=NOW - timedelta(hours=3),
            end=NOW - timedelta(hours=1),
            multiplier=2,
            note="past sale",
        ),
        DemandEvent(
            start=NOW + timedelta(hours=2),
            end=NOW + timedelta(hours=4),
            multiplier=3,
            note="launch",
        ),
    ],
)
POINT = DemandPoint(
    at=NOW - timedelta(minutes=5),
    queued=12,
    in_flight=3,
    recent_per_h=310,
    forecast_per_h=330,
    need_per_h=350,
    target_per_h=400,
    capacity_per_h=380,
    action="raise",
    reason="raise to 400/h: need 350/h with 20 % headroom",
)


def _message(config: AgentConfig, demand: DemandPoint | None = None, **kw: object) -> str:
    args: dict[str, object] = {
        "run": 7,
        "session": 2,
        "now": NOW,
        "trigger_block": "Trigger: heartbeat (nothing else happened).",
        "fleet_text": "No instances.",
        "config": config,
        "wakes": [],
        "next_heartbeat_at": None,
        **kw,
    }
    if demand is not None:
        args["demand"] = demand
    return context_message(**args)  # type: ignore[arg-type]


def test_demand_mode_shows_who_sets_the_target_the_reading_why_and_the_events() -> None:
    text = _message(DEMAND, POINT)
    section = text.split("## Demand\n", 1)[1].split("\n\n## Limits", 1)[0]
    assert text.index("## Target") < text.index("## Demand") < text.index("## Limits")
    assert "set by demand mode within [100, 900] proofs/h" in section
    assert "do not try to change it" in section
    assert f"latest reading (as of 11:55, 5 min ago): {POINT.line()}" in section
    assert "- why: raise to 400/h: need 350/h" in section
    assert "x3 14:00-16:00 UTC 2026-12-06 (launch)" in section
    assert "past sale" not in section, "an event that ended is not ahead"


def test_demand_mode_without_a_reading_says_so() -> None:
    section = _message(DEMAND).split("## Demand\n", 1)[1]
    assert "latest reading: none yet" in section.split("## Limits", 1)[0]


def test_fixed_mode_leaves_the_message_as_it_was() -> None:
    # Demand figures set but the mode fixed: the point and the events are
    # not shown, the bytes are those of a call that knows no demand.
    fixed = DEMAND.model_copy(update={"target_mode": "fixed"})
    text = _message(fixed, POINT)
    assert text == _message(fixed)
    assert "Demand" not in text and "demand" not in text
    assert "## Target\n400 proofs/hour\n\n## Limits\n" in text
    # The cached prefix is the same in both modes; it names the expect_demand
    # tool (known events are recorded in either mode) and nothing else of demand.
    assert "demand" not in system_prompt("a").replace("expect_demand", "")


async def test_load_context_reads_the_latest_point_in_demand_mode_only(store: Store) -> None:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, started_time=NOW)
    history = DemandHistory(store)
    history.record("a", POINT.model_copy(update={"at": NOW - timedelta(minutes=30)}))
    history.record("a", POINT)
    runlog = RunLogActivities(store)
    for run, config in ((1, DEMAND), (2, DEMAND.model_copy(update={"target_mode": "fixed"}))):
        inp = RunInput(agent_id="a", run=run, session=1, triggers=[], config=config)
        await env.run(runlog.load_context, LoadContextRequest(run_input=inp, started_at=NOW))
    shown = store.messages.get_message("a", 1, CONTEXT_SEQ)
    assert shown is not None and "(as of 11:55, 5 min ago)" in shown.content
    fixed = store.messages.get_message("a", 2, CONTEXT_SEQ)
    assert fixed is not None and "## Demand" not in fixed.content
