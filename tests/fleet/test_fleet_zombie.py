"""Fleet tools under production faults, against the simulator over HTTP: zombie
create attempts, cancelled attempts, the monitor's reconcile, replayed calls
after a reset, and heartbeats."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from datetime import UTC, datetime
from functools import partial
from typing import Any

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities import heartbeat
from activities.fleet import FleetActivities
from activities.fleet_create import Renter
from activities.fleet_spend import SpendBook
from fleet_agent.config.settings import ProverSpec
from fleet_agent.fleet.labels import create_label
from fleet_agent.fleet.reconcile import ReconcileRequest
from fleet_agent.fleet.settle import settle_label
from fleet_agent.models import AgentConfig, PollRequest
from fleet_agent.store import Store, ToolJournal
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from testkit.sim_helpers import SIM_RAM_GIB
from tests.helpers import eventually, tool_request

AGENT = "fleet-zombie"
DELAY = 1.0  # real seconds a delayed create waits in the simulator before it rents


_req = partial(tool_request, AGENT)


async def _offers(tools: FleetActivities, n: int = 2) -> list[int]:
    result = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"gpu_name": "RTX 4090", "limit": 10})
    )
    rows = json.loads(result.content.split("\n", 1)[1])
    assert len(rows) >= n, result.content
    return [int(r["offer_id"]) for r in rows[:n]]


def _labelled(sim: SimServer, label: str) -> list[int]:
    return sorted(i["id"] for i in sim.market.state()["instances"] if i["label"] == label)


async def _delayed_requests(sim: SimServer, n: int) -> None:
    async def arrived() -> bool:
        return sim.market.counters["create_delays"] >= n

    await eventually(arrived, timeout=10, what=f"{n} delayed create(s) inside the simulator")


# ------------------------------------------------------------------ zombies


@pytest.mark.parametrize("delayed", [1, 2], ids=["zombie-lands-last", "zombie-lands-first"])
async def test_overlapping_attempts_of_one_create_keep_one_machine(
    tools: FleetActivities, sim: SimServer, store: Store, delayed: int
) -> None:
    """Attempt 2 of a create starts while attempt 1 is still inside its rental
    (Temporal timed it out; it cannot be stopped). Exactly one machine carries
    the call's label, and both attempts tell the model that machine."""
    (offer,) = await _offers(tools, 1)
    sim.market.set_faults(create_delay_next=delayed, create_delay_seconds=DELAY)
    req = _req("create_instance", {"offer_id": offer, "reason": "r"}, tool_id="toolu_zombie")
    label = create_label(AGENT, 1, "toolu_zombie")
    attempt1 = asyncio.create_task(ActivityEnvironment().run(tools.create_instance, req))
    await _delayed_requests(sim, 1)
    attempt2 = await ActivityEnvironment().run(tools.create_instance, req)
    attempt1_result = await attempt1
    machines = _labelled(sim, label)
    assert len(machines) == 1, machines
    for result in (attempt1_result, attempt2):
        assert not result.is_error and result.mutating, result.content
        assert f"instance {machines[0]}" in result.content
    record = ToolJournal(store).get(AGENT, "toolu_zombie")
    assert record is not None and record.status == "done"
    assert record.result is not None and f"instance {machines[0]}" in record.result.content


async def test_attempt_after_a_dead_workers_rental_adopts_its_machine(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    """Attempt 1 journalled the call and sent the rental, then its worker died:
    nothing will record its outcome. Attempt 2 looks for the label (none yet),
    rents, and finds the offer taken by attempt 1's machine, which landed in
    between: it adopts that machine instead of reporting the offer gone."""
    (offer,) = await _offers(tools, 1)
    sim.market.set_faults(create_delay_next=2, create_delay_seconds=DELAY)
    req = _req("create_instance", {"offer_id": offer, "reason": "r"}, tool_id="toolu_dead")
    label = create_label(AGENT, 1, "toolu_dead")
    ToolJournal(store).start(req, datetime.now(UTC))
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        dead_workers_request = asyncio.create_task(
            vast.create_instance(offer, image="x", disk=10, label=label)
        )
        await _delayed_requests(sim, 1)
        attempt2 = await ActivityEnvironment().run(tools.create_instance, req)
        landed = await dead_workers_request
    assert _labelled(sim, label) == [landed]
    assert not attempt2.is_error and attempt2.mutating, attempt2.content
    assert f"machine is instance {landed}" in attempt2.content
    assert "another attempt of this same call" in attempt2.content


async def test_a_zombie_landing_during_the_rental_is_destroyed(
    tools: FleetActivities, sim: SimServer
) -> None:
    """Attempt 1's rental lands while attempt 2's is on its way: two machines
    with one label. Attempt 2 keeps the oldest (the zombie's), destroys its
    own, and says so. (The simulator rents an offer once, so the zombie's
    machine is rented here through the client, on a second offer.)"""
    offer, other = await _offers(tools, 2)
    sim.market.set_faults(create_delay_next=1, create_delay_seconds=DELAY)
    req = _req("create_instance", {"offer_id": offer, "reason": "r"}, tool_id="toolu_z2")
    label = create_label(AGENT, 1, "toolu_z2")
    attempt2 = asyncio.create_task(ActivityEnvironment().run(tools.create_instance, req))
    await _delayed_requests(sim, 1)  # attempt 2 checked the label and is renting
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        zombie = await vast.create_instance(other, image="x", disk=10, label=label)
    result = await attempt2
    assert _labelled(sim, label) == [zombie]
    assert sim.market.counters["creates"] == 2 and sim.market.counters["destroys"] == 1
    assert not result.is_error and result.mutating
    assert f"machine is instance {zombie}" in result.content
    assert "duplicated it and was destroyed" in result.content


async def test_a_cancelled_create_finishes_its_rental_and_records_it(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    """Temporal cancels an attempt that missed its heartbeat timeout. Once the
    rental is sent, the attempt still finishes it, settles the label and
    records the result before it lets the cancellation through."""
    (offer,) = await _offers(tools, 1)
    sim.market.set_faults(create_delay_next=1, create_delay_seconds=DELAY)
    req = _req("create_instance", {"offer_id": offer, "reason": "r"}, tool_id="toolu_cancel")
    env = ActivityEnvironment()
    attempt = asyncio.create_task(env.run(tools.create_instance, req))
    await _delayed_requests(sim, 1)
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    machines = _labelled(sim, create_label(AGENT, 1, "toolu_cancel"))
    assert len(machines) == 1, "the rental finished before the attempt ended"
    record = ToolJournal(store).get(AGENT, "toolu_cancel")
    assert record is not None and record.status == "done" and record.result is not None
    assert f"instance {machines[0]}" in record.result.content
    retry = await ActivityEnvironment().run(tools.create_instance, req)
    assert retry.replayed and f"instance {machines[0]}" in retry.content
    assert sim.market.counters["creates"] == 1


async def test_a_paused_agent_is_told_the_machine_an_earlier_attempt_rented(
    tools: FleetActivities, sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    """Paused after attempt 1 rented: the retry reports that machine, not
    "paused, nothing was rented", which would be a lie."""
    (offer,) = await _offers(tools, 1)
    req = _req("create_instance", {"offer_id": offer, "reason": "r"}, tool_id="toolu_p")
    ToolJournal(store).start(req, datetime.now(UTC))
    (machine,) = await _rent(sim, [offer], [create_label(AGENT, 1, "toolu_p")])
    configs.config = AgentConfig(paused=True)
    result = await ActivityEnvironment().run(tools.create_instance, req)
    assert not result.is_error and result.mutating
    assert f"machine is instance {machine}" in result.content
    assert sim.market.instance_ids() == [machine]


async def test_offer_gone_after_a_rental_was_sent_says_the_outcome_is_unknown(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    req = _req("create_instance", {"offer_id": 999_999_999, "reason": "r"}, tool_id="toolu_u")
    ToolJournal(store).start(req, datetime.now(UTC))  # an attempt sent it, then died
    result = await ActivityEnvironment().run(tools.create_instance, req)
    assert result.is_error and "not available" in result.content
    assert "outcome is unknown" in result.content
    assert create_label(AGENT, 1, "toolu_u") in result.content


# ------------------------------------------------------------------ monitor


async def _rent(sim: SimServer, offers: list[int], labels: list[str]) -> list[int]:
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        return [
            await vast.create_instance(o, image="x", disk=10, label=lab)
            for o, lab in zip(offers, labels, strict=True)
        ]


async def test_poll_reports_duplicates_and_reconcile_keeps_the_oldest(
    tools: FleetActivities, sim: SimServer
) -> None:
    """A zombie landed after every attempt finished: the poll shows the label
    twice, reconcile_labels destroys all but the oldest of each label."""
    offers = await _offers(tools, 7)
    a, b, c = (create_label(AGENT, 1, t) for t in ("ta", "tb", "tc"))
    ids = await _rent(sim, offers, [a, a, b, c, c, c, "someone-else"])
    foreign = ids[6]
    env = ActivityEnvironment()
    snap = await env.run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    assert snap.duplicate_labels == {a: ids[0:2], c: ids[3:6]}
    assert "duplicate" in snap.to_text()
    report = await env.run(tools.reconcile_labels, ReconcileRequest(agent_id=AGENT))
    assert {r.label: r.kept for r in report.labels} == {a: ids[0], c: ids[3]}
    assert sorted(report.destroyed) == sorted([ids[1], ids[4], ids[5]])
    assert report.remaining == []
    assert sorted(sim.market.instance_ids()) == sorted([ids[0], ids[2], ids[3], foreign])
    after = await env.run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    assert after.duplicate_labels == {}
    again = await env.run(tools.reconcile_labels, ReconcileRequest(agent_id=AGENT))
    assert again.labels == []


async def test_a_duplicate_that_will_not_go_is_reported_not_hidden(store: Store) -> None:
    """vast.ai fails every destroy: the label is checked again, the duplicate
    is reported as remaining, and a create attempt fails retryably (its retry
    settles the label again) instead of claiming one machine."""
    deletes: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            deletes.append(request.url.path)
            return httpx.Response(500, text="Internal Server Error")
        rows = [{"id": i, "label": "L", "actual_status": "running"} for i in (21, 20)]
        return httpx.Response(200, json={"instances": rows, "next_token": None})

    async def no_sleep(_: float) -> None:
        return None

    transport = httpx.MockTransport(handler)
    async with VastClient("k", "https://vast.test", transport=transport, pacing=NO_PACING) as vast:
        settled = await settle_label(vast, "L", sleep=no_sleep)
        assert settled.kept is not None and settled.kept.id == 20
        assert settled.destroyed == [] and settled.remaining == [21]
        assert deletes == ["/api/v0/instances/21/"] * 2
        with pytest.raises(ApplicationError) as info:
            await Renter(
                vast, ProverSpec(mode="curio_on_host"), SpendBook(store, time.time)
            ).settle(_req("create_instance", {}), "L", origin="other")
    assert info.value.type == "DuplicateNotDestroyed" and not info.value.non_retryable


# ------------------------------------------------------------------ reset


async def test_replayed_calls_return_their_recorded_result_and_touch_nothing(
    tools: FleetActivities, sim: SimServer
) -> None:
    """After `temporal workflow reset` the run replays the model's stored calls
    with the same tool_use_ids. A create whose machine has since been destroyed
    must not rent again, and a destroy must not act again."""
    (offer,) = await _offers(tools, 1)
    env = ActivityEnvironment()
    create = _req("create_instance", {"offer_id": offer, "reason": "r"}, tool_id="toolu_c")
    first = await env.run(tools.create_instance, create)
    assert first.mutating and not first.replayed
    (machine,) = sim.market.instance_ids()
    destroy = _req("destroy_instance", {"instance_id": machine, "reason": "r"}, tool_id="toolu_d")
    destroyed = await env.run(tools.destroy_instance, destroy)
    assert destroyed.mutating and f"Destroyed instance {machine}" in destroyed.content
    counters = dict(sim.market.counters)

    again = await env.run(tools.create_instance, create)
    assert again.replayed and again.mutating == first.mutating
    assert again.content.endswith(first.content) and "nothing was done again" in again.content
    replayed_destroy = await env.run(tools.destroy_instance, destroy)
    assert replayed_destroy.replayed and replayed_destroy.content.endswith(destroyed.content)
    assert sim.market.counters["creates"] == counters["creates"]
    assert sim.market.counters["destroys"] == counters["destroys"]
    assert sim.market.instance_ids() == []


async def test_read_tools_are_journalled_too(tools: FleetActivities, sim: SimServer) -> None:
    env = ActivityEnvironment()
    req = _req("get_fleet_status", {}, tool_id="toolu_s")
    first = await env.run(tools.get_fleet_status, req)
    (offer,) = await _offers(tools, 1)
    await _rent(sim, [offer], [create_label(AGENT, 1, "tx")])
    again = await env.run(tools.get_fleet_status, req)
    assert again.replayed and again.content.endswith(first.content)
    assert first.content.startswith("0 instances")


# ------------------------------------------------------------------ heartbeats


async def test_every_fleet_activity_heartbeats(tools: FleetActivities, sim: SimServer) -> None:
    (offer,) = await _offers(tools, 1)
    calls: list[tuple[Any, Any]] = [
        (tools.get_fleet_status, _req("get_fleet_status", {})),
        (tools.search_offers, _req("search_offers", {})),
        (tools.create_instance, _req("create_instance", {"offer_id": offer, "reason": "r"})),
        (tools.poll_fleet, PollRequest(agent_id=AGENT)),
        (tools.reconcile_labels, ReconcileRequest(agent_id=AGENT)),
    ]
    for fn, arg in calls:
        env = ActivityEnvironment()
        beats: list[tuple[Any, ...]] = []
        env.on_heartbeat = lambda *details, beats=beats: beats.append(details)
        await env.run(fn, arg)
        assert beats, f"{fn.__name__} sent no heartbeat"
    (machine,) = sim.market.instance_ids()
    env = ActivityEnvironment()
    beats = []
    env.on_heartbeat = lambda *details: beats.append(details)
    await env.run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": machine, "reason": "r"})
    )
    assert beats, "destroy_instance sent no heartbeat"


async def test_reconcile_never_touches_an_agent_whose_id_extends_ours(
    tools: FleetActivities, sim: SimServer
) -> None:
    """Agent `fleet-zombie/sub` has a duplicate label; agent `fleet-zombie`
    neither sees it in its poll nor destroys it: a label prefix is not ownership."""
    offers = await _offers(tools, 3)
    theirs = create_label(f"{AGENT}/sub", 1, "tz")
    mine = create_label(AGENT, 1, "tz")
    ids = await _rent(sim, offers, [theirs, theirs, mine])
    env = ActivityEnvironment()
    snap = await env.run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    assert [i.id for i in snap.instances] == [ids[2]] and snap.duplicate_labels == {}
    report = await env.run(tools.reconcile_labels, ReconcileRequest(agent_id=AGENT))
    assert report.labels == [] and sorted(sim.market.instance_ids()) == sorted(ids)
    sub = await env.run(tools.reconcile_labels, ReconcileRequest(agent_id=f"{AGENT}/sub"))
    assert sub.destroyed == [ids[1]]


async def test_a_tool_waiting_for_its_pacing_slot_keeps_heartbeating(
    sim: SimServer, store: Store, configs: StaticConfigs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pacing wait is inside the activity, so a worker that waits for a
    search slot is never taken for a dead one."""
    fast = functools.partial(heartbeat.heartbeating, every=0.05)
    monkeypatch.setattr("activities.fleet_calls.heartbeating", fast)
    async with VastClient(sim.api_key, sim.url, pacing=NO_PACING) as vast:
        tools = FleetActivities(
            vast,
            ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
            store=store,
            configs=configs,
        )
        # A 429 a moment ago: the search endpoint is blocked for ~0.5 s.
        blocked = vast.pacer.refused("POST", "/api/v0/bundles/", attempt=0, backoff_base=0.5)
        env = ActivityEnvironment()
        beats: list[float] = []
        env.on_heartbeat = lambda *_: beats.append(time.monotonic())
        start = time.monotonic()
        result = await env.run(tools.search_offers, _req("search_offers", {}))
        waited = time.monotonic() - start
    assert not result.is_error, result.content
    assert waited >= blocked
    assert len(beats) >= 5 and beats[-1] - beats[0] >= 0.6 * blocked
