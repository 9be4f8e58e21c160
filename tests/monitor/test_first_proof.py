"""A machine whose prover starts proving wakes a run: the monitor signals
`running → proving` once per machine (workflows/monitor.py, FIRST_PROOF_PATCH),
read from the simulated prover's status port over HTTP by the real client."""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.fleet.snapshot import PROVING
from fleet_agent.models import MonitorConfig, MonitorInput, TriggerKind
from fleet_agent.store import Store
from simulator.server import SimServer
from tests.helpers import eventually, finished_runs, running_worker, status
from workflows import FleetAgentWorkflow
from workflows.monitor import FIRST_PROOF_PATCH, FleetMonitorWorkflow

POLL_SECONDS = 60


def _proving_signals(store: Store, agent_id: str) -> list[str]:
    """The instance of every `→ proving` change the agent's finished runs took in."""
    return [
        t.instance_id
        for r in finished_runs(store, agent_id)
        for t in r.triggers
        if t.kind == TriggerKind.STATE_CHANGED and t.new_state == PROVING
    ]


async def _step(env: WorkflowEnvironment, sim: SimServer, seconds: int) -> None:
    sim.market.advance(seconds)
    await env.sleep(seconds)


async def _idle(handle: WorkflowHandle[FleetAgentWorkflow, None]) -> bool:
    st = await status(handle)
    return st.current_run is None and not st.pending_triggers


async def _marker(client: Client, workflow_id: str, name: str) -> bool:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return any(
        name.encode() in e.SerializeToString()
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    )


async def test_each_machine_that_starts_proving_wakes_a_run_once(
    ts_env: WorkflowEnvironment, store: Store, sim: SimServer, fleet: Any
) -> None:
    async with running_worker(ts_env.client, store, provider=AutopilotProvider(), fleet=fleet) as h:
        # No heartbeat within the test: a run after a first proof is the signal's.
        handle = await h.start_agent(
            target_proofs_per_hour=40, monitor_poll_seconds=POLL_SECONDS, heartbeat_seconds=86_400
        )

        async def all_proving() -> list[int]:
            await _step(ts_env, sim, 120)
            truth = sim.market.state()["instances"]
            ok = truth and all(t["prover_phase"] == "proving" for t in truth)
            # The monitor sees the last of them at its next poll (below).
            return sorted(int(t["id"]) for t in truth) if ok else []

        fleet_ids = await eventually(all_proving, timeout=120, what="a proving fleet")

        async def signalled() -> list[str]:
            await _step(ts_env, sim, POLL_SECONDS)
            got = _proving_signals(store, handle.id)
            return got if len(got) >= len(fleet_ids) and await _idle(handle) else []

        got = await eventually(signalled, timeout=120, what="a run for every first proof")
        assert sorted(got) == sorted(str(i) for i in fleet_ids), got
        runs = finished_runs(store, handle.id)
        woken = [r for r in runs if any(t.new_state == PROVING for t in r.triggers)]
        change = next(t for r in woken for t in r.triggers if t.new_state == PROVING)
        assert change.old_state == "running" and "started proving" in change.detail, change
        assert await _marker(ts_env.client, f"{handle.id}/monitor", FIRST_PROOF_PATCH)

        # Proving on: no machine is signalled twice.
        for _ in range(10):
            await _step(ts_env, sim, POLL_SECONDS)
        assert sorted(_proving_signals(store, handle.id)) == sorted(got)

        # A monitor continued from one that had signalled all but one machine
        # signals that one only; one from an input older than the set
        # (`proving` None) signals none of them.
        monitor_id = f"{handle.id}/monitor"
        states = {i: "running" for i in fleet_ids}
        for proving, expected in ((fleet_ids[1:], [fleet_ids[0]]), (None, [])):
            await ts_env.client.get_workflow_handle(monitor_id).terminate("test: replaced")
            before = len(_proving_signals(store, handle.id))
            await ts_env.client.start_workflow(
                FleetMonitorWorkflow.run,
                MonitorInput(
                    agent_id=handle.id,
                    config=MonitorConfig(poll_seconds=POLL_SECONDS, target_proofs_per_hour=40),
                    last_states=states,
                    proving=proving,
                ),
                id=monitor_id,
                task_queue=h.task_queue,
            )
            for _ in range(3):
                await _step(ts_env, sim, POLL_SECONDS)
            await eventually(lambda: _idle(handle), timeout=60, what="the agent idle")
            new = _proving_signals(store, handle.id)[before:]
            assert new == [str(i) for i in expected], (proving, new)
