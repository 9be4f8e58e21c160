"""The monitor learns whether its agent runs from its poll (`agent_open`),
not from an `agent_is_open` activity before every poll (issue 10), and still
ends at its next poll after its agent closes."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.config.settings import ProverSpec
from fleet_agent.models import PollRequest
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from testkit.sim_helpers import SIM_RAM_GIB
from tests.helpers import eventually, running_worker
from workflows.monitor import OPEN_IN_POLL_PATCH

# The shortest interval: the tests wait in real time. The time-skipping
# server skips only while a test sleeps or waits for a result, and here
# `env.sleep` timed out and `result()` failed once the agent was terminated.
POLL_SECONDS = 5


async def _scheduled(client: Client, workflow_id: str) -> Counter[str]:
    """Activities the workflow scheduled, by type; empty until it exists."""
    try:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
    except RPCError:
        return Counter()
    return Counter(
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    )


async def _completed(monitor: WorkflowHandle[Any, Any]) -> bool:
    return (await monitor.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_a_new_monitor_polls_without_agent_is_open_and_ends_with_its_agent(
    ts_env: WorkflowEnvironment, store: Store, fleet: FleetActivities
) -> None:
    client = ts_env.client
    async with running_worker(client, store, provider=AutopilotProvider(), fleet=fleet) as h:
        # Nothing to rent: no signal that could fail (and call agent_is_open).
        handle = await h.start_agent(target_proofs_per_hour=0, monitor_poll_seconds=POLL_SECONDS)
        monitor_id = f"{handle.id}/monitor"

        async def two_polls() -> Counter[str]:
            scheduled = await _scheduled(client, monitor_id)
            return scheduled if scheduled["poll_fleet"] >= 2 else Counter()

        scheduled = await eventually(two_polls, timeout=60, what="two polls")
        assert scheduled["agent_is_open"] == 0, scheduled
        history = await client.get_workflow_handle(monitor_id).fetch_history()
        markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
        assert any(OPEN_IN_POLL_PATCH.encode() in e.SerializeToString() for e in markers)

        await handle.terminate("agent retired")
        polls_before = (await _scheduled(client, monitor_id))["poll_fleet"]
        monitor = client.get_workflow_handle(monitor_id)

        await eventually(lambda: _completed(monitor), timeout=60, what="the monitor to end")
        after = await _scheduled(client, monitor_id)
        assert after["agent_is_open"] == 0, after
        # A poll in flight at the termination may already see it.
        assert after["poll_fleet"] <= polls_before + 1, "it ends at its next poll"


async def test_the_poll_says_whether_the_agent_runs_and_never_fails_for_it(
    client: Client, fleet: FleetActivities
) -> None:
    req = PollRequest(agent_id="no-such-agent")
    # Temporal does not know the agent: closed.
    snap = await ActivityEnvironment(client=client).run(fleet.poll_fleet, req)
    assert snap.agent_open is False and not snap.error
    # No client to ask (Temporal cannot say): the poll still succeeds, unknown.
    snap = await ActivityEnvironment().run(fleet.poll_fleet, req)
    assert snap.agent_open is None and not snap.error


async def test_a_monitor_whose_polls_fail_still_ends_with_its_agent(
    ts_env: WorkflowEnvironment, store: Store
) -> None:
    """No poll answers `agent_open`: the monitor asks agent_is_open after each failed poll."""
    client = ts_env.client
    down = httpx.MockTransport(lambda _: httpx.Response(503, text="down for maintenance"))
    async with VastClient(
        "key", timeout=2, backoff_base=0.01, pacing=NO_PACING, transport=down
    ) as vast:
        fleet = FleetActivities(
            vast,
            ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
            store=store,
        )
        async with running_worker(client, store, provider=AutopilotProvider(), fleet=fleet) as h:
            handle = await h.start_agent(
                target_proofs_per_hour=0, monitor_poll_seconds=POLL_SECONDS
            )
            monitor_id = f"{handle.id}/monitor"

            async def checked_after_a_failed_poll() -> Counter[str]:
                scheduled = await _scheduled(client, monitor_id)
                return scheduled if scheduled["agent_is_open"] >= 1 else Counter()

            await eventually(checked_after_a_failed_poll, timeout=60, what="a failed poll")
            await handle.terminate("agent retired")
            monitor = client.get_workflow_handle(monitor_id)

            await eventually(lambda: _completed(monitor), timeout=60, what="the monitor to end")
            after = await _scheduled(client, monitor_id)
            assert after["agent_is_open"] == after["poll_fleet"], after
