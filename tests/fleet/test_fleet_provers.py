"""Capacity measured over HTTP: the monitor's poll reads each simulated machine's
prover status port with the real client, as it would a rented machine's."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment, WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.models import (
    AgentConfig,
    PollRequest,
    ToolResult,
    TriggerKind,
)
from fleet_agent.store import FailedHosts, RunRecord, Store
from simulator.server import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers import (
    eventually,
    finished_runs,
    run_that_destroyed,
    running_worker,
    status,
    tool_request,
)
from tests.helpers.fleet_provers import AGENT, rent

_req = partial(tool_request, AGENT)


async def _poll_for(
    tools: FleetActivities, sim: SimServer, minutes: int, *, step: int = 60
) -> FleetSnapshot:
    env = ActivityEnvironment()
    snap = None
    for _ in range(minutes * 60 // step):
        sim.market.advance(step)
        snap = await env.run(
            tools.poll_fleet, PollRequest(agent_id=AGENT, target_proofs_per_hour=100)
        )
    assert snap is not None
    return snap


def _truth(sim: SimServer) -> dict[int, dict[str, Any]]:
    return {int(i["id"]): i for i in sim.market.state()["instances"]}


async def test_the_poll_measures_each_machine_near_the_simulators_truth(
    tools: FleetActivities, sim: SimServer
) -> None:
    await rent(tools, 3)
    snap = await _poll_for(tools, sim, 4 * 60)
    truth = _truth(sim)
    rows = {r.id: r for r in snap.instances}
    assert len(rows) == 3
    for iid, row in rows.items():
        real = truth[iid]["proofs_per_hour"]
        assert real > 0, truth[iid]
        assert row.measured_proofs_per_hour == pytest.approx(real, rel=0.03), (iid, row, real)
        assert row.proofs_per_hour == row.measured_proofs_per_hour
        assert row.prover.startswith("proving")
    total = sim.market.state()["proofs_per_hour"]
    assert snap.capacity_proofs_per_hour == pytest.approx(total, rel=0.03)
    # The views read what the poll measured, without reading the provers again.
    status = await ActivityEnvironment().run(tools.get_fleet_status, _req("get_fleet_status", {}))
    shown = json.loads(status.content.split("```json\n", 1)[1].split("\n```", 1)[0])
    assert {r["id"]: r.get("measured_proofs_per_hour") for r in shown} == {
        iid: r.measured_proofs_per_hour for iid, r in rows.items()
    }
    assert all(r["usd_per_100_proofs"] > 0 and r["age_minutes"] > 0 for r in shown)


async def test_a_stuck_prover_is_not_proving_and_its_host_is_remembered(
    tools: FleetActivities, sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    await rent(tools, 2)
    snap = await _poll_for(tools, sim, 90)
    victim, healthy = sorted(r.id for r in snap.instances)
    assert all(r.state == "running" for r in snap.instances)
    assert sim.market.prover_fault(victim, "stuck")
    # gpu_util stays high and the status still says "proving": only the
    # counter standing still gives it away.
    snap = await _poll_for(tools, sim, 4)
    assert {r.id: r.state for r in snap.instances}[victim] == "running", "judged too soon"
    snap = await _poll_for(tools, sim, 21)
    rows = {r.id: r for r in snap.instances}
    assert rows[victim].state == "not_proving", rows[victim]
    assert "finished no proof" in rows[victim].note
    assert rows[victim].expected_proofs_per_hour == 0 and rows[healthy].state == "running"
    machine = _truth(sim)[victim]["machine_id"]
    now = datetime.fromtimestamp(sim.market.now(), UTC)
    remembered = FailedHosts(store).active(AGENT, now)
    assert [h.machine_id for h in remembered] == [machine]
    assert "not proving" in remembered[0].reason
    # Recorded once per failure, not at every poll.
    first = remembered[0].failed_at
    await _poll_for(tools, sim, 5)
    assert FailedHosts(store).active(AGENT, now)[0].failed_at == first


async def test_a_prover_that_never_starts_is_not_proving_after_the_limit(
    tools: FleetActivities, sim: SimServer
) -> None:
    """A CUDA error at start: the status says error, not proving at once."""
    await rent(tools, 1)
    await _poll_for(tools, sim, 90)
    (iid,) = sim.market.instance_ids()
    assert sim.market.prover_fault(iid, "cuda_error")
    snap = await _poll_for(tools, sim, 1)
    (row,) = snap.instances
    assert row.state == "not_proving" and "prover error" in row.note, row


async def test_the_destroy_tool_keeps_a_young_healthy_machine(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    configs.config = AgentConfig(min_release_age_minutes=45)
    await rent(tools, 1)
    (iid,) = sim.market.instance_ids()
    env = ActivityEnvironment()
    destroy = {"instance_id": iid, "reason": "surplus"}
    refused = await env.run(tools.destroy_instance, _req("destroy_instance", destroy))
    assert refused.is_error and "min_release_age_minutes" in refused.content
    assert iid in sim.market.instance_ids()
    # Dead machines go whatever their age.
    sim.market.kill(iid, "offline")
    gone = await env.run(tools.destroy_instance, _req("destroy_instance", destroy))
    assert gone.mutating, gone.content


async def test_the_monitor_reports_a_stuck_prover_and_the_agent_replaces_it(
    ts_env: WorkflowEnvironment, store: Store, sim: SimServer, fleet: FleetActivities
) -> None:
    """running → not_proving reaches the agent as one state_changed with the
    reason, and the run it starts destroys the machine and rents another."""
    async with running_worker(ts_env.client, store, provider=AutopilotProvider(), fleet=fleet) as h:
        handle = await h.start_agent(
            target_proofs_per_hour=40,
            monitor_poll_seconds=60,
            heartbeat_seconds=3600,
            not_proving_minutes=15,
        )

        async def proving() -> list[int]:
            sim.market.advance(120)
            await ts_env.sleep(120)
            truth = _truth(sim)
            st = await status(handle)
            busy = st.current_run is not None or st.pending_triggers
            ok = truth and all(t["prover_phase"] == "proving" for t in truth.values())
            return sorted(truth) if ok and not busy else []

        fleet_ids = await eventually(proving, timeout=90, what="a proving fleet")
        victim = fleet_ids[0]
        runs_before = len(finished_runs(store, handle.id))
        assert sim.market.prover_fault(victim, "stuck")

        async def replaced() -> RunRecord | None:
            sim.market.advance(60)
            await ts_env.sleep(60)
            ids = set(sim.market.instance_ids())
            if victim in ids or not ids - set(fleet_ids):
                return None
            # The new machine is rented before the run that rented it has
            # ended and recorded itself (a sleep can end in between).
            return run_that_destroyed(store, handle.id, victim)

        acting = await eventually(replaced, timeout=90, what="the stuck machine replaced")
        assert acting is not None
        # What the agent was told up to the replacement (a later run may
        # hear the monitor report the destroy).
        runs = [r for r in finished_runs(store, handle.id)[runs_before:] if r.run <= acting.run]
        changes = [
            t
            for r in runs
            for t in r.triggers
            if t.kind == TriggerKind.STATE_CHANGED and t.instance_id == str(victim)
        ]
        assert [(c.old_state, c.new_state) for c in changes][:1] == [("running", "not_proving")]
        assert "finished no proof" in changes[0].detail, changes[0]
        woken = next(r for r in runs if any(t in r.triggers for t in changes))
        assert woken.run == acting.run, "the run the signal woke replaced it"
        assert acting.mutating_calls >= 2, acting.actions_digest


async def test_the_poll_drops_failed_hosts_whose_time_is_up(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    hosts = FailedHosts(store)
    now = datetime.fromtimestamp(sim.market.now(), UTC)
    hosts.remember("other", machine_id=1, host_id=None, reason="old", at=now, until=now)
    hosts.remember(
        AGENT,
        machine_id=2,
        host_id=None,
        reason="fresh",
        at=now,
        until=now.replace(year=now.year + 1),
    )
    await _poll_for(tools, sim, 1)
    assert hosts.forget_expired(now) == 0, "the poll already dropped the expired entry"
    assert [h.machine_id for h in hosts.active(AGENT, now)] == [2]


async def test_a_temporary_machine_is_marked_and_may_go_from_21_minutes(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    """The create's `temporary` reaches the snapshot through the journal, and
    the destroy guardrail lets such a machine go from 21 minutes where an
    ordinary one of the same age is kept; a bad value rents nothing."""
    configs.config = AgentConfig(min_release_age_minutes=45)
    env = ActivityEnvironment()
    found: ToolResult = await env.run(tools.search_offers, _req("search_offers", {"limit": 5}))
    listed = json.loads(found.content.split("\n", 1)[1])
    first, second = listed[0]["offer_id"], listed[1]["offer_id"]
    bad = await env.run(
        tools.create_instance,
        _req("create_instance", {"offer_id": first, "reason": "t", "temporary": "soon"}),
    )
    assert bad.is_error and "temporary" in bad.content and not sim.market.instance_ids()
    made = await env.run(
        tools.create_instance,
        _req("create_instance", {"offer_id": first, "reason": "bridge", "temporary": True}),
    )
    plain = await env.run(
        tools.create_instance, _req("create_instance", {"offer_id": second, "reason": "cover"})
    )
    assert made.mutating and plain.mutating, (made.content, plain.content)
    status = await env.run(tools.get_fleet_status, _req("get_fleet_status", {}))
    rows = json.loads(status.content.split("```json\n", 1)[1].split("\n```", 1)[0])
    marked = {row["id"]: row.get("temporary", False) for row in rows}
    assert sorted(marked.values()) == [False, True], rows
    (bridge,) = [iid for iid, temp in marked.items() if temp]
    (cover,) = [iid for iid, temp in marked.items() if not temp]
    sim.market.advance(22 * 60)
    kept = await env.run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": cover, "reason": "x"})
    )
    assert kept.is_error and "min_release_age_minutes" in kept.content
    gone = await env.run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": bridge, "reason": "x"})
    )
    assert gone.mutating, gone.content
    assert sorted(sim.market.instance_ids()) == [cover]


async def test_idle_provers_and_an_offline_blip_cost_no_machine_and_no_host(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    """Issue 41, done by doing it: provers the work source gives nothing to
    for three hours, then a host offline for a minute. The monitor's poll
    (the real client, the real status reads over HTTP) replaces none, bans
    no host, and counts the idle machines as capacity."""
    await rent(tools, 2)
    snap = await _poll_for(tools, sim, 60, step=120)
    assert all(r.state == "running" for r in snap.instances), snap.to_text()
    capacity = snap.capacity_proofs_per_hour
    sim.market.set_faults(work_share=0.0)
    snap = await _poll_for(tools, sim, 3 * 60, step=120)
    assert all(r.state == "running" for r in snap.instances), snap.to_text()
    assert snap.capacity_proofs_per_hour == pytest.approx(capacity, rel=0.1)
    sim.market.set_faults(work_share=1.0, offline_blip_s=150.0)
    blipped = snap.instances[0].id
    assert sim.market.set_instance_state(blipped, "blip")
    snap = await _poll_for(tools, sim, 1, step=30)
    row = next(r for r in snap.instances if r.id == blipped)
    assert row.state == "offline" and row.in_grace, row
    snap = await _poll_for(tools, sim, 3, step=30)
    assert all(r.state == "running" for r in snap.instances), snap.to_text()
    now = datetime.fromtimestamp(sim.market.now(), UTC)
    assert FailedHosts(store).active(AGENT, now) == []
