"""A healthy machine with work in flight is drained, not destroyed mid-proof
(issue 41): the destroy tool asks its prover to take no new work, the
monitor's poll destroys it once the work in flight is done, and a stranger
without the machine's token cannot drain it. Against the simulator over
HTTP, with the real client and the fleet activities."""

from __future__ import annotations

from functools import partial
from typing import Any

import httpx
import pytest
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.fleet.drain import DRAIN_LIMIT_S, drain_done, drain_token
from fleet_agent.fleet.provers import ProverTrack
from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.fleet.triage import triage
from fleet_agent.models import AgentConfig, PollRequest, ToolResult
from simulator.prover_http import FLOOD_BYTES
from simulator.server import SimServer
from testkit.fakes.configs import StaticConfigs
from testkit.sim_helpers import prover_url, row
from tests.helpers import eventually, tool_request

AGENT = "fleet-agent"
_req = partial(tool_request, AGENT)


def test_a_drain_ends_when_the_work_is_done_or_after_its_limit() -> None:
    base = ProverTrack(instance_id=1, first_seen_at=0, last_read_at=0, progress_at=0)
    busy = base.model_copy(update={"phase": "proving", "in_flight": 2, "draining_since": 100.0})
    assert drain_done(base, 500.0) is None  # not draining
    assert drain_done(busy, 100.0 + DRAIN_LIMIT_S - 1) is None
    assert "with its work in flight" in str(drain_done(busy, 100.0 + DRAIN_LIMIT_S))
    done = busy.model_copy(update={"in_flight": 0, "queued": 0})
    assert drain_done(done, 101.0) == "drained: no work in flight"
    gone = busy.model_copy(update={"phase": "unreachable"})
    assert drain_done(gone, 101.0) is not None
    key = b"k" * 32
    assert drain_token(key, "fleet-agent/a/r1-x") != drain_token(key, "fleet-agent/a/r1-y")
    assert drain_token(key, "l") != drain_token(b"j" * 32, "l")


async def _poll(tools: FleetActivities, sim: SimServer, seconds: int) -> FleetSnapshot:
    sim.market.advance(seconds)
    return await ActivityEnvironment().run(
        tools.poll_fleet, PollRequest(agent_id=AGENT, target_proofs_per_hour=10)
    )


async def _rent_one(tools: FleetActivities) -> int:
    env = ActivityEnvironment()
    found: ToolResult = await env.run(tools.search_offers, _req("search_offers", {"limit": 1}))
    offer = found.content.split('"offer_id":', 1)[1].split(",", 1)[0]
    made = await env.run(
        tools.create_instance, _req("create_instance", {"offer_id": int(offer), "reason": "t"})
    )
    assert made.mutating, made.content
    return int(made.content.split("instance ", 1)[1].split()[0].strip(".,:()"))


async def _proving(tools: FleetActivities, sim: SimServer) -> tuple[int, dict[str, Any] | None]:
    """A machine rented and polled until its prover proves; its last status."""
    iid = await _rent_one(tools)
    status = None
    for _ in range(120):
        await _poll(tools, sim, 60)
        status = _status(sim, iid)
        if status and status["phase"] == "proving":
            break
    return iid, status


def _status(sim: SimServer, iid: int) -> dict[str, Any] | None:
    answer, body = sim.market.prover_endpoint(iid)
    return dict(body) if answer == "ok" and body is not None else None


async def test_a_busy_machine_is_drained_and_destroyed_with_its_work_done(
    tools: FleetActivities, sim: SimServer
) -> None:
    iid = await _rent_one(tools)
    for _ in range(120):
        snap = await _poll(tools, sim, 60)
        status = _status(sim, iid)
        if status and status["phase"] == "proving" and status["proofs_completed"] >= 2:
            break
    assert status is not None and status["proofs_in_flight"] > 0, status
    done_before, held = status["proofs_completed"], status["proofs_in_flight"]
    result = await ActivityEnvironment().run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": iid, "reason": "surplus"})
    )
    assert result.mutating and result.content.startswith(f"Draining instance {iid}"), result
    assert row(sim, iid)["cur_state"] == "running", "not destroyed yet"
    snap = await _poll(tools, sim, 5)
    (shown,) = [r for r in snap.instances if r.id == iid]
    assert shown.draining and shown.expected_proofs_per_hour == 0
    assert triage([r.model_dump() for r in snap.instances]) == ([], [])
    # Left alone for 20 minutes, it finishes what it held and takes nothing new.
    sim.market.advance(20 * 60)
    held_done = _status(sim, iid)
    assert held_done is not None and held_done["proofs_completed"] == done_before + held
    assert held_done["proofs_in_flight"] == 0 and held_done["work_queued"] == 0
    last = _status(sim, iid)
    for _ in range(60):
        sim.market.advance(30)
        last = _status(sim, iid) or last  # what the poll is about to read
        snap = await _poll(tools, sim, 0)
        if all(r.id != iid for r in snap.instances):
            break
    assert all(r.id != iid for r in snap.instances), "destroyed once drained"
    assert last is not None and last["draining"] and last["proofs_in_flight"] == 0
    assert last["proofs_completed"] == done_before + held, "the work in flight finished"
    assert sim.market.state()["counters"]["proofs_lost_to_destroys"] == 0


async def test_an_idle_machine_goes_at_once_and_a_stranger_cannot_drain_one(
    tools: FleetActivities, sim: SimServer
) -> None:
    iid, _ = await _proving(tools, sim)
    url = prover_url(row(sim, iid)).replace("/status", "/drain")
    async with httpx.AsyncClient(timeout=5) as http:
        assert (await http.post(url)).status_code == 401
        wrong = {"Authorization": "Bearer " + drain_token(b"not the worker's key", "x")}
        assert (await http.post(url, headers=wrong)).status_code == 401
    assert not (_status(sim, iid) or {}).get("draining")
    sim.market.set_faults(work_share=0.0)
    await _poll(tools, sim, 60)
    result = await ActivityEnvironment().run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": iid, "reason": "idle"})
    )
    assert result.content.startswith(f"Destroyed instance {iid}"), result.content


@pytest.mark.parametrize("mode", ["trickle", "flood"])
async def test_a_host_that_trickles_or_floods_its_drain_answer_is_destroyed_at_once(
    tools: FleetActivities, sim: SimServer, mode: str
) -> None:
    """Issue 51, finding 3: a busy machine's host answers the drain 200 and
    then a byte a second (for 2 minutes), or 200 MB. Read whole, the trickle
    held the destroy for the write timeout, six attempts in a row, and the
    flood was read into the worker's memory. Now the drain reads 1 KB under
    one deadline, and one call of the destroy tool (one attempt: it returns,
    nothing to retry) destroys the machine at once."""
    iid, status = await _proving(tools, sim)
    assert status is not None and status["proofs_in_flight"] > 0, status
    await _poll(tools, sim, 5)  # the monitor's track says it holds work: a drain is tried
    sim.market.hostile_host(iid, drain=mode)
    result = await ActivityEnvironment().run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": iid, "reason": "surplus"})
    )
    assert result.mutating and result.content.startswith(f"Destroyed instance {iid}"), result
    assert sim.market.state()["counters"]["destroys"] == 1

    async def ended() -> dict[str, int]:
        counters: dict[str, int] = sim.market.state()["counters"]
        return counters if counters.get("hostile_drains") else {}

    counters = await eventually(ended, what="the host's answer to end")
    assert counters["hostile_drains"] == 1, "asked once"
    # A byte a second: the trickle lasted as many seconds as it sent bytes,
    # cut at the 5 s deadline, not at its 120 s; the flood cut after 1 KB
    # (what the socket buffers took before the hang-up was seen aside).
    limit = 30 if mode == "trickle" else FLOOD_BYTES // 10
    assert counters["hostile_drain_bytes"] < limit, counters


async def test_the_create_gives_each_machine_its_own_token(
    tools: FleetActivities, sim: SimServer
) -> None:
    first, second = await _rent_one(tools), await _rent_one(tools)
    tokens = [dict(row(sim, i)["extra_env"]).get("FLEET_DRAIN_TOKEN") for i in (first, second)]
    assert all(tokens) and tokens[0] != tokens[1]


async def test_the_simulator_counts_the_work_a_destroy_kills(
    tools: FleetActivities, sim: SimServer
) -> None:
    """What the market day's `proofs_lost_to_destroys` counts: a busy
    machine destroyed outright (as before drains) loses what it held."""
    iid, status = await _proving(tools, sim)
    assert status is not None and status["proofs_in_flight"] > 0
    sim.market.destroy_instance(iid)
    counters = sim.market.state()["counters"]
    assert counters["destroys_mid_proof"] == 1
    assert counters["proofs_lost_to_destroys"] == status["proofs_in_flight"]


async def test_machines_released_a_moment_ago_do_not_count_for_the_capacity_floor(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    """One reply that releases every machine (a model told to by a host's
    text: tests/llm/test_prompt_injection.py): a drained machine stays listed and
    proving until the monitor's next poll, yet the floor counts it gone at once."""
    ids = [(await _proving(tools, sim))[0] for _ in range(2)]
    snap = await _poll(tools, sim, 5)
    assert all((_status(sim, i) or {}).get("proofs_in_flight") for i in ids), "both busy"
    rates = [r.expected_proofs_per_hour for r in snap.instances if r.id in ids]
    # The floor (min_fleet_fraction 0.5 of the target) lets one machine go, not both.
    configs.config = AgentConfig(target_proofs_per_hour=min(rates), min_release_age_minutes=0)
    env = ActivityEnvironment()
    first, second = [
        await env.run(
            tools.destroy_instance, _req("destroy_instance", {"instance_id": i, "reason": "all"})
        )
        for i in ids
    ]
    assert first.mutating and first.content.startswith(f"Draining instance {ids[0]}"), first
    assert second.is_error and not second.mutating, second.content
    assert "below min_fleet_fraction 0.5" in second.content, second.content
    assert not (_status(sim, ids[1]) or {}).get("draining")
