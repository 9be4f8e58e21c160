"""A run due when the agent's history is within a tenth of its limit starts
in a fresh execution (workflows/agent.py, `FRESH_BEFORE_RUN_PATCH`) instead
of being handed over in flight a moment later, which stops the
time-skipping server's clock (temporalio/sdk-java pull request 1539)."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.store import Store
from tests.helpers import eventually, previous_execution, running_worker, status


async def test_a_run_due_near_the_limit_starts_in_the_next_execution(
    ts_env: WorkflowEnvironment, store: Store
) -> None:
    async with running_worker(ts_env.client, store, provider=AutopilotProvider()) as h:
        handle = await h.start_agent(target_proofs_per_hour=100)

        async def one_run() -> bool:
            st = await status(handle)
            return st.run_count == 1 and st.current_run is None

        await eventually(one_run, what="the first run done")
        # 905 refused signals: past nine tenths of the 1000 an execution takes.
        for i in range(905):
            await handle.signal("cancel_wake", {"wake_id": f"none-{i}"})
        await handle.signal("trigger_now", {"reason": "go on"})

        async def second_run_done() -> bool:
            st = await status(handle)
            return st.run_count == 2 and st.current_run is None

        await eventually(second_run_done, what="the second run done")
        assert (await status(handle)).executions == 2
        old = await previous_execution(ts_env.client, handle)
        children = [
            e
            async for e in old.fetch_history_events()
            if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
            and e.start_child_workflow_execution_initiated_event_attributes.workflow_type.name
            == "AgentRunWorkflow"
        ]
        assert len(children) == 1, "the second run started in the old execution"
