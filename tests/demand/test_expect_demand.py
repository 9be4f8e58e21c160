"""Known demand events by message: the model's `expect_demand` tool.

The merge rule (fleet_agent/demand/events.py) on its own; then the agent
loop on the time-skipping server with the local Messages API scripting the
calls: a good call lands in status.config.demand_events, bad ones are tool
errors that change nothing and the loop goes on; in demand mode the
monitor is told the new events at once, and the histories replay.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from activities.fleet import FleetActivities
from fleet_agent.demand.events import MAX_EVENTS, MODEL_SHARE, merge_event
from fleet_agent.demand.forecast import DemandEvent
from fleet_agent.llm.verdict import judge
from fleet_agent.models import RunResult, RunStatus, Verdict
from fleet_agent.store import AgentConfigs, Store
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import eventually, running_worker, status, status_after, wait_runs
from workflows import AgentRunWorkflow, FleetAgentWorkflow

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
DONE = 'Noted.\n<verdict>{"action": false, "state_changed": true}</verdict>'


def _event(start_h: float, hours: float = 2.0, x: float = 3.0, note: str = "") -> DemandEvent:
    start = NOW + timedelta(hours=start_h)
    return DemandEvent(start=start, end=start + timedelta(hours=hours), multiplier=x, note=note)


def test_merge_drops_ended_events_and_does_not_repeat_one() -> None:
    past, ahead = _event(-5), _event(2)
    merged = merge_event([past, ahead], _event(4), NOW)
    assert merged.added and merged.events == [ahead, _event(4)]
    assert merged.ended == [past] and merged.dropped == []
    # The same window and multiplier is the same event, whatever its note says.
    again = merge_event(merged.events, _event(2, note="launch"), NOW)
    assert not again.added and again.events == merged.events
    assert again.notes() == ["already known: nothing added"]
    # Another multiplier over the same window is another event.
    assert merge_event(merged.events, _event(2, x=4), NOW).added


def test_merge_keeps_at_most_max_drops_the_one_ending_first_and_says_so() -> None:
    full = [_event(h) for h in range(1, MAX_EVENTS + 1)]
    merged = merge_event(full, _event(30), NOW)
    assert len(merged.events) == MAX_EVENTS
    assert merged.dropped == [full[0]] and merged.events[-1] == _event(30)
    assert "dropped to keep at most 20 events" in merged.notes()[0]
    assert full[0].describe() in merged.notes()[0]
    # The new event is kept even when it ends before all the others.
    first = merge_event(full, _event(0.5, hours=0.25), NOW)
    assert first.events[-1] == _event(0.5, hours=0.25) and first.dropped == [full[0]]


def test_a_run_that_recorded_an_event_is_no_noop() -> None:
    quiet = Verdict(action=False, state_changed=False)
    result = RunResult(run=1, status=RunStatus.OK, verdict=quiet)
    judge(result, [])
    assert result.noop and not result.in_prompt
    result = RunResult(run=1, status=RunStatus.OK, verdict=quiet, demand_events=[_event(2)])
    judge(result, [])
    assert not result.noop and result.in_prompt


def _at(delta: timedelta) -> str:
    return (datetime.now(UTC) + delta).replace(microsecond=0).isoformat()


def _calls() -> list[tuple[str, dict[str, Any]]]:
    """One good call, its duplicate, and hostile ones, in one reply."""
    start = _at(timedelta(hours=2))
    good: dict[str, Any] = {"start": start, "end": _at(timedelta(hours=4)), "multiplier": 3}
    return [
        ("expect_demand", {**good, "note": "launch"}),
        ("expect_demand", good),
        ("expect_demand", {**good, "end": start}),  # ends as it starts
        ("expect_demand", {**good, "start": start[:16]}),  # no offset
        ("expect_demand", {**good, "multiplier": 500}),
        ("expect_demand", {**good, "end": _at(timedelta(days=9))}),  # over 7 days
        ("expect_demand", {"start": "tomorrow", "end": "later", "multiplier": 3}),
        (
            "expect_demand",  # ended already
            {"start": _at(-timedelta(hours=3)), "end": _at(-timedelta(hours=2)), "multiplier": 2},
        ),
        # Times whose conversion to UTC overflows (`astimezone` raised
        # OverflowError inside the run workflow, and the run's task failed).
        ("expect_demand", {**good, "start": "0001-01-01T00:30:00+01:00"}),
        ("expect_demand", {**good, "end": "9999-12-31T23:30:00-05:00"}),
    ]


def _expecter(req: Request) -> Reply:
    """The first run records the events; every other run ends at once."""
    if "agent started" in req.last_user_text().lower() and not req.tool_results():
        return Reply(tool_calls=_calls())
    return Reply(text=DONE)


async def test_expect_demand_lands_in_the_config_and_bad_calls_are_tool_errors(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(_expecter)
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(heartbeat_seconds=3600)
        await ts_env.sleep(11)
        st = await status_after(handle, 1)
        assert st.last_run is not None and st.last_run.status == RunStatus.OK
        events = st.config.demand_events
        assert [(e.multiplier, e.note) for e in events] == [(3.0, "launch")]
        assert events[0].end - events[0].start == timedelta(hours=2)

        results = fake_llm.requests[1].tool_results()
        texts = [str(r["content"]) for r in results]
        errors = [bool(r.get("is_error")) for r in results]
        assert errors == [False, False, True, True, True, True, True, True, True, True], texts
        assert texts[0].startswith("Recorded x3 ") and "(launch)" in texts[0]
        assert "events only act in demand mode" in texts[0]
        assert "already known" in texts[1]
        assert "must end after it starts" in texts[2]
        assert "needs a UTC offset" in texts[3]
        assert "multiplier" in texts[4] and "less than or equal to 100" in texts[4]
        assert "at most 7 days" in texts[5]
        assert "not an RFC 3339 time" in texts[6]
        assert "ended already" in texts[7]
        assert all("time out of range (years 1970 to 2199)" in t for t in texts[8:]), texts[8:]
        assert all("nothing was recorded" in t for t in texts[2:3] + texts[5:6] + texts[7:8])

        # The loop goes on: another run, and the event is still there.
        await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "look"})
        await wait_runs(store, handle.id, 2)
        st = await status_after(handle, 2)
        assert st.last_run is not None and st.last_run.status == RunStatus.OK
        assert st.config.demand_events == events

        # The kept config follows (a restart finds the event).
        async def kept() -> list[DemandEvent]:
            config = AgentConfigs(store).load(handle.id)
            return config.demand_events if config is not None else []

        assert await eventually(kept, what="the kept config with the event") == events


async def test_in_demand_mode_the_monitor_is_told_the_new_event(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic, fleet: FleetActivities
) -> None:
    good = {"start": _at(timedelta(hours=2)), "end": _at(timedelta(hours=3)), "multiplier": 4}

    def respond(req: Request) -> Reply:
        if "agent started" in req.last_user_text().lower() and not req.tool_results():
            return Reply(tool_calls=[("expect_demand", {**good, "note": "launch"})])
        return Reply(text=DONE)

    fake_llm.set_responder(respond)
    async with running_worker(ts_env.client, store, fleet=fleet) as h:
        handle = await h.start_agent(
            heartbeat_seconds=36_000,
            target_mode="demand",
            target_proofs_per_hour=100,
            min_target=50,
            max_target=1000,
            monitor_poll_seconds=600,
        )
        await ts_env.sleep(11)
        st = await status_after(handle, 1)
        assert [e.note for e in st.config.demand_events] == ["launch"]
        text = str(fake_llm.requests[1].tool_results()[0]["content"])
        assert "The forecast takes it from 20 min before it starts" in text

        async def told() -> bool:
            monitor = ts_env.client.get_workflow_handle(f"{handle.id}/monitor")
            async for event in monitor.fetch_history_events():
                if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                    continue
                attrs = event.workflow_execution_signaled_event_attributes
                payloads = attrs.input.payloads
                if attrs.signal_name == "configure" and payloads:
                    sent = json.loads(payloads[0].data)
                    if [e["note"] for e in sent.get("demand_events", [])] == ["launch"]:
                        return True
            return False

        await eventually(told, what="the monitor's configure signal with the event")
        assert (await status(handle)).config.demand_events == st.config.demand_events
        # The new path replays: the agent's history (with its patch marker
        # and the configure signal) and the run that recorded the event.
        replayer = Replayer(
            workflows=[FleetAgentWorkflow, AgentRunWorkflow],
            data_converter=pydantic_data_converter,
        )
        for workflow_id in (handle.id, f"{handle.id}/run-1"):
            history = await ts_env.client.get_workflow_handle(workflow_id).fetch_history()
            await replayer.replay_workflow(history)
        await ts_env.client.get_workflow_handle(f"{handle.id}/monitor").terminate("done")


def _window(start_h: int, x: float) -> dict[str, Any]:
    return {
        "start": _at(timedelta(hours=start_h)),
        "end": _at(timedelta(hours=start_h + 1)),
        "multiplier": x,
    }


async def test_the_model_adds_within_its_share_and_never_touches_an_operators_event(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """The operator's 20 events fill the list: the model's is refused, and so
    is every hostile call; with room made, the model keeps at most its share,
    pushing out only its own."""
    operators = [_window(h, 2) for h in range(1, MAX_EVENTS + 1)]
    sent: list[dict[str, Any]] = []  # the model's events of its second run
    hostile: list[dict[str, Any]] = [
        {**_window(30, 3), "set_by": "operator"},  # claims to be the operator
        {**_window(30, 3), "note": "x" * 5_000},
        {**_window(30, 3), "multiplier": {"value": 3}},
        {**_window(30, 3), "start": 1_765_000_000},
        {**_window(30, 3), "end": "2026-12-07T16:00:00Z; drop all events"},
    ]

    def respond(req: Request) -> Reply:
        text = req.last_user_text()
        if req.tool_results():
            return Reply(text=DONE)
        if "agent started" in text.lower():
            calls = [("expect_demand", _window(30, 3)), *(("expect_demand", h) for h in hostile)]
            return Reply(tool_calls=calls)
        if "room now" in text:
            sent.extend(_window(h, 3) for h in range(30, 42))
            return Reply(tool_calls=[("expect_demand", w) for w in sent])
        return Reply(text=DONE)

    fake_llm.set_responder(respond)
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(heartbeat_seconds=36_000, demand_events=operators)
        await ts_env.sleep(11)
        st = await status_after(handle, 1)
        kept = st.config.demand_events
        assert len(kept) == MAX_EVENTS and {e.set_by for e in kept} == {"operator"}
        results = fake_llm.requests[1].tool_results()
        texts = [str(r["content"]) for r in results]
        assert all(r.get("is_error") for r in results), texts
        assert "Refused: the list holds 20 events an operator set" in texts[0]
        assert "nothing was recorded" in texts[0]
        assert "set_by" in texts[1] and "Extra inputs are not permitted" in texts[1]
        assert "note" in texts[2] and "200 characters" in texts[2]
        assert "multiplier" in texts[3]
        assert all("RFC 3339" in t for t in texts[4:]), texts[4:]

        # The operator makes room (its own list, its right); the model keeps
        # at most MODEL_SHARE of its own.
        await handle.execute_update(
            FleetAgentWorkflow.update_config, {"demand_events": operators[:5]}
        )
        await handle.signal(FleetAgentWorkflow.trigger_now, {"reason": "room now"})
        await wait_runs(store, handle.id, 2)
        st = await status_after(handle, 2)
        events = st.config.demand_events
        mine = [e for e in events if e.set_by == "model"]
        theirs = [e for e in events if e.set_by == "operator"]
        assert len(mine) == MODEL_SHARE and len(theirs) == 5
        assert theirs == kept[:5]
        # The two that end first of its own went, and the model was told.
        assert mine == [DemandEvent.model_validate({**w, "set_by": "model"}) for w in sent[2:]]
        last = str(fake_llm.requests[-1].tool_results()[-1]["content"])
        assert "dropped to keep at most 20 events" in last and "[set by the model]" in last


async def test_the_agent_applies_the_models_rule_again_to_the_list_as_it_is_when_the_run_ends(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    """The run saw room; while it ran, the operator filled the list: the
    agent adds the model's events as the model's, and so adds none."""
    answered = threading.Event()

    def respond(req: Request) -> Reply:
        if req.tool_results():
            answered.wait(timeout=60)  # the run stays in flight until the operator acted
            return Reply(text=DONE)
        if "agent started" in req.last_user_text().lower():
            return Reply(tool_calls=[("expect_demand", _window(h, 3)) for h in range(30, 33)])
        return Reply(text=DONE)

    fake_llm.set_responder(respond)
    operators = [_window(h, 2) for h in range(1, MAX_EVENTS + 1)]
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(heartbeat_seconds=36_000)
        await ts_env.sleep(11)

        async def decided() -> bool:
            return len(fake_llm.requests) >= 2

        await eventually(decided, what="the model's events decided in the run")
        await handle.execute_update(FleetAgentWorkflow.update_config, {"demand_events": operators})
        answered.set()
        st = await status_after(handle, 1)
        run = fake_llm.requests[1].tool_results()
        assert not any(r.get("is_error") for r in run), "the run had room"
        events = st.config.demand_events
        assert len(events) == MAX_EVENTS and {e.set_by for e in events} == {"operator"}
        assert events == [DemandEvent.model_validate(e) for e in operators]
