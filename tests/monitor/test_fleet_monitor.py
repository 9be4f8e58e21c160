"""The fleet monitor against the simulator: a failure becomes one signal to the
agent, and a replacement."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.models import MonitorConfig, MonitorInput, Trigger, TriggerKind
from fleet_agent.store import RunRecord, Store
from simulator import SimServer
from tests.helpers import eventually, finished_runs, run_that_destroyed, running_worker, status
from tests.helpers.fleet import _instances
from workflows import monitor as monitor_module
from workflows.monitor import FleetMonitorWorkflow


@pytest.mark.parametrize(
    ("sandbox", "death"),
    [(True, "exited"), (False, "exited"), (True, "offline")],
    ids=["sandboxed", "unsandboxed", "offline-past-grace"],
)
async def test_monitor_turns_a_failure_into_one_signal_and_a_replacement(
    ts_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    sandbox: bool,
    death: str,
) -> None:
    """The agent, its monitor and a run with fleet tools, in the sandbox and
    out of it (FLEET_WORKFLOW_SANDBOX=off). A container that exited is
    replaced by the run its signal wakes; a host that went offline is waited
    out for `offline_grace_minutes` (5), then signalled again and replaced."""
    async with running_worker(
        ts_env.client, store, provider=AutopilotProvider(), fleet=fleet, sandbox=sandbox
    ) as h:
        # A long heartbeat: after the kill only the monitor may notice it first.
        handle = await h.start_agent(
            target_proofs_per_hour=40, monitor_poll_seconds=30, heartbeat_seconds=36_000
        )

        async def running_fleet() -> list[dict[str, Any]]:
            sim.market.advance(60)
            await ts_env.sleep(60)  # the monitor polls the advanced market
            instances = _instances(sim)
            st = await status(handle)
            settled = st.current_run is None and not st.pending_triggers
            steady = all(i["actual_status"] == "running" for i in instances)
            return instances if instances and settled and steady else []

        up = await eventually(running_fleet, timeout=60, what="a running fleet")
        before = {i["id"] for i in _instances(sim)}
        victim = up[0]["id"]
        runs_before = len(finished_runs(store, handle.id))
        sim.market.kill(victim, death)
        killed_at = sim.market.now()

        async def replaced() -> RunRecord | None:
            sim.market.advance(30)
            await ts_env.sleep(30)
            ids = {i["id"] for i in _instances(sim)}
            if victim in ids or not ids - before:
                return None
            # The new machine is rented before the run that rented it has
            # ended and recorded itself (a sleep can end in between).
            return run_that_destroyed(store, handle.id, victim)

        acting = await eventually(replaced, timeout=60, what="the dead machine replaced")
        assert acting is not None
        runs = finished_runs(store, handle.id)[runs_before:]

        def changes_of(chosen: list[RunRecord]) -> list[Trigger]:
            return [
                t
                for r in chosen
                for t in r.triggers
                if t.kind == TriggerKind.STATE_CHANGED and t.instance_id == str(victim)
            ]

        changes = changes_of(runs)
        # What the agent was told up to the replacement (a later run may
        # hear the monitor report the destroy: `exited → destroyed`).
        told = changes_of([r for r in runs if r.run <= acting.run])
        assert [(c.old_state, c.new_state) for c in told][:1] == [("running", death)]
        assert sum(1 for c in changes if c.new_state == death) == 1, "one signal per transition"
        if death == "offline":
            assert sim.market.now() - killed_at >= 5 * 60, "waited out for the grace"
            assert [c.new_state for c in told] == ["offline", "offline past grace"]
        assert told[-1] in acting.triggers, "the run its signal woke replaced it"
        assert acting.mutating_calls >= 2, acting.actions_digest  # destroy + create


class _Patched:
    """`temporalio.workflow` as the monitor's signal handler reads it: every patch on."""

    @staticmethod
    def patched(patch_id: str) -> bool:
        return True


def test_the_same_config_again_leaves_the_next_poll_where_it_was(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent sends its config at each continue-as-new: polled at once,
    the monitor moved its polls onto the instants of the agent's runs, and a
    benchmark's day parted on which of a run and a poll the worker took first
    (bench/results/2026-12-07-demand-day-reproducible.md)."""
    monkeypatch.setattr(monitor_module, "workflow", _Patched)
    config = MonitorConfig(poll_seconds=60, target_proofs_per_hour=500)
    monitor = FleetMonitorWorkflow(MonitorInput(agent_id="a", config=config))
    monitor.configure(config.model_copy())
    assert not monitor._reconfigured, "the same config: the poll keeps its time"
    monitor.configure(config.model_copy(update={"target_proofs_per_hour": 600}))
    assert monitor._reconfigured, "a change applies at once"
    assert monitor._config.target_proofs_per_hour == 600
