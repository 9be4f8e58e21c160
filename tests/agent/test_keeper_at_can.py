"""The config keeper schedules no write in the task that continues as new
(workflows/agent_config.py, `KEEP_BEFORE_CAN_PATCH`): such an activity is
abandoned, and stops the time-skipping server's clock for good
(temporalio/sdk-java issue 1138). The next execution writes the config it
is handed. A run that records a known event changes the config as it ends,
the moment an execution after `continue_as_new_after_runs` runs ends too."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from fleet_agent.store import AgentConfigs, Store
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import eventually, has_continued, previous_execution, running_worker

DONE = 'Noted.\n<verdict>{"action": false, "state_changed": true}</verdict>'


def _expecter(req: Request) -> Reply:
    if "agent started" in req.last_user_text().lower() and not req.tool_results():
        start = datetime.now(UTC) + timedelta(hours=2)
        event = {
            "start": start.isoformat(),
            "end": (start + timedelta(hours=2)).isoformat(),
            "multiplier": 3,
        }
        return Reply(tool_calls=[("expect_demand", event)])
    return Reply(text=DONE)


async def test_a_config_changed_as_the_execution_ends_is_kept_by_the_next_one(
    ts_env: WorkflowEnvironment, store: Store, fake_llm: FakeAnthropic
) -> None:
    fake_llm.set_responder(_expecter)
    async with running_worker(ts_env.client, store) as h:
        handle = await h.start_agent(heartbeat_seconds=3600, continue_as_new_after_runs=1)

        async def continued() -> bool:
            return await has_continued(ts_env.client, handle)

        await eventually(continued, what="the execution continued after its run")

        async def kept() -> bool:
            config = AgentConfigs(store).load(handle.id)
            return config is not None and len(config.demand_events) == 1

        await eventually(kept, what="the next execution keeping the config")
        old = await previous_execution(ts_env.client, handle)
        saves = [
            e
            async for e in old.fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and e.activity_task_scheduled_event_attributes.activity_type.name == "save_agent_config"
        ]
        # The closing task: its last events are the task's completion and the
        # continue-as-new; none may be a write.
        closed = [e async for e in old.fetch_history_events()][-1].event_id
        assert all(e.event_id < closed - 2 for e in saves), "a write scheduled as it ended"
        # The clock still skips: an abandoned activity would hold it. Half
        # the heartbeat: a skip across the agent's hourly runs failed now and
        # then in the test server's own call ("Timeout expired", "h2 protocol
        # error"), which says nothing of an abandoned activity.
        await asyncio.wait_for(ts_env.sleep(1_800), timeout=60)
