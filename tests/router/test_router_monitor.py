"""The agent's side of the router (issue 52) against the simulator: the
monitor's poll writes the router's members and reads its witness instead
of any host's status; the destroy tool drains through the router; the
router's queue is a demand reading.

The router here is the test: it writes `MachineWitness` rows and a
`RouterQueue` (fleet_agent/cuzk/witness.py) to the store as
router/store_sync.py does. Machines are rented on the simulator directly,
with the front port mapped as the create path maps it (``-p 9821:9821``:
fleet_agent/cuzk/credentials.py, `machine_env`), labelled as the agent's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import ActivityEnvironment

from activities.demand import DemandActivities, source_from_env
from activities.fleet import FleetActivities
from activities.fleet_credentials import MachineCredentials
from fleet_agent.cuzk.witness import MachineWitness, RouterQueue, WitnessPhase
from fleet_agent.demand.reading import DemandReadRequest
from fleet_agent.demand.settings import DemandEnv
from fleet_agent.env.env_settings import SettingsError
from fleet_agent.fleet.drain import DRAIN_LIMIT_S
from fleet_agent.fleet.labels import create_label
from fleet_agent.fleet.prover import DEFAULT_FRONT_PORT, ProverSpec
from fleet_agent.fleet.snapshot import FleetInstance, FleetSnapshot
from fleet_agent.fleet.triage import triage
from fleet_agent.models import PollRequest
from fleet_agent.store import FailedHosts, ProverTracks, RouterMembers, RouterWitness, Store
from fleet_agent.vast.client import VastClient
from simulator.server import SimServer
from testkit.fakes.configs import StaticConfigs
from testkit.sim_helpers import SIM_RAM_GIB, find_offer, rent, row
from tests.helpers import tool_request

AGENT = "fleet-agent"
_req = partial(tool_request, AGENT)
FRONT = {f"-p {DEFAULT_FRONT_PORT}:{DEFAULT_FRONT_PORT}": "1"}


@pytest_asyncio.fixture
async def routed(
    sim: SimServer, store: Store, configs: StaticConfigs, tmp_path: Path
) -> AsyncIterator[FleetActivities]:
    from fleet_agent.vast.pacing import NO_PACING

    async with VastClient(
        sim.api_key, sim.url, timeout=2, create_timeout=2, backoff_base=0.01, pacing=NO_PACING
    ) as vast:
        yield FleetActivities(
            vast,
            ProverSpec(mode="router", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
            machine_env=MachineCredentials(tmp_path / "router-ca", DEFAULT_FRONT_PORT),
            store=store,
            configs=configs,
            clock=sim.market.now,
        )


class Router:
    """What the router writes to the store, on the market's clock."""

    def __init__(self, store: Store, sim: SimServer) -> None:
        self._witness = RouterWitness(store)
        self._sim = sim
        self.queue = RouterQueue(at=self.now())

    def now(self) -> datetime:
        return datetime.fromtimestamp(self._sim.market.now(), UTC)

    def write(self, *seen: MachineWitness) -> None:
        self.queue = self.queue.model_copy(update={"at": self.now()})
        self._witness.replace(AGENT, list(seen), self.queue, self.now())


def witness(iid: int, phase: WitnessPhase = "serving", **fields: Any) -> MachineWitness:
    return MachineWitness.model_validate(
        {"instance_id": iid, "phase": phase, "since": datetime(2026, 1, 1, tzinfo=UTC), **fields}
    )


def _rent(sim: SimServer, n: int, env: dict[str, str] = FRONT) -> int:
    offer = find_offer(sim)
    return rent(sim, offer["id"], label=create_label(AGENT, 1, f"t{n}"), env=env)


async def _poll(tools: FleetActivities, sim: SimServer, seconds: float = 60) -> FleetSnapshot:
    sim.market.advance(seconds)
    return await ActivityEnvironment().run(
        tools.poll_fleet, PollRequest(agent_id=AGENT, target_proofs_per_hour=10)
    )


async def _running(tools: FleetActivities, sim: SimServer, *ids: int) -> FleetSnapshot:
    for _ in range(120):
        snap = await _poll(tools, sim)
        if all(_row(snap, i).state == "running" for i in ids):
            return snap
    raise AssertionError(f"{ids} not running")


def _row(snap: FleetSnapshot, iid: int) -> FleetInstance:
    (found,) = [r for r in snap.instances if r.id == iid]
    return found


def _front(sim: SimServer, iid: int) -> str:
    shown = row(sim, iid)
    mapped = shown["ports"][f"{DEFAULT_FRONT_PORT}/tcp"][0]["HostPort"]
    return f"{str(shown['public_ipaddr']).strip()}:{mapped}"


async def test_a_member_is_a_running_machine_with_its_front_mapped_until_destroyed(
    routed: FleetActivities, sim: SimServer, store: Store
) -> None:
    mapped, unmapped = _rent(sim, 1), _rent(sim, 2, env={})
    members = RouterMembers(store)
    await _poll(routed, sim, 1)
    assert members.load(AGENT) == [], "no member before it runs"
    await _running(routed, sim, mapped, unmapped)
    (member,) = members.load(AGENT)
    assert member.instance_id == mapped and member.want == "serve"
    assert member.address == _front(sim, mapped)
    assert member.label == row(sim, mapped)["label"]
    # Frozen: vast.ai still lists its ports, but it is not running: no member.
    assert sim.market.set_instance_state(mapped, "freeze")
    snap = await _poll(routed, sim, 5)
    assert _row(snap, mapped).state != "running" and row(sim, mapped)["ports"]
    assert members.load(AGENT) == []
    assert sim.market.set_instance_state(mapped, "unfreeze")
    await _running(routed, sim, mapped)
    assert [m.instance_id for m in members.load(AGENT)] == [mapped]
    sim.market.destroy_instance(mapped)
    await _poll(routed, sim)
    assert members.load(AGENT) == [], "a destroyed machine leaves"


async def test_the_witness_done_counts_become_a_measured_rate(
    routed: FleetActivities, sim: SimServer, store: Store
) -> None:
    iid = _rent(sim, 1)
    snap = await _running(routed, sim, iid)
    # Its host would say its prover fails: nobody asks it; the router's word counts.
    sim.market.hostile_host(iid, status={"phase": "error", "detail": "the host's word"})
    router = Router(store, sim)
    rate = _row(snap, iid).expected_proofs_per_hour  # the model's: believed
    assert rate > 0
    start, done, busy = router.now(), 0, 0.0
    for minute in range(1, 91):
        sim.market.advance(60)
        busy = minute * 60.0
        done = int(busy * rate / 3600)
        last = start + timedelta(seconds=done * 3600 / rate) if done else None
        router.write(
            witness(
                iid,
                sent=done + 1,
                done=done,
                in_flight=1,
                busy_seconds=busy,
                last_done_at=last,
                last_sent_at=last or start,
            )
        )
        snap = await _poll(routed, sim, 0)
    shown = _row(snap, iid)
    assert shown.state == "running" and shown.measured_proofs_per_hour is not None
    assert shown.measured_proofs_per_hour == pytest.approx(rate, rel=0.05)
    assert shown.prover.startswith("proving: router: serving"), shown.prover
    assert f"{done} done, 0 rejected" in shown.prover


@pytest.mark.parametrize("fault", ["failing", "rejected"])
async def test_a_failing_or_rejected_machine_is_replaced_and_its_host_banned(
    routed: FleetActivities, sim: SimServer, store: Store, fault: str
) -> None:
    iid, healthy = _rent(sim, 1), _rent(sim, 2)
    await _running(routed, sim, iid, healthy)
    router = Router(store, sim)
    ok = witness(healthy, done=3, in_flight=1, busy_seconds=600)
    if fault == "failing":
        bad = witness(iid, "failing", reason="3 jobs failed in a row", done=2, failed=3)
    else:
        bad = witness(iid, done=5, rejected=2, in_flight=1, busy_seconds=900)
    router.write(bad, ok)
    snap = await _poll(routed, sim, 0)
    shown = _row(snap, iid)
    assert shown.expected_proofs_per_hour == 0, shown
    assert shown.state == ("not_proving" if fault == "failing" else "suspect"), shown
    destroy, _ = triage([r.model_dump() for r in snap.instances])
    assert [i for i, _ in destroy] == [iid], "replaced, the healthy one kept"
    machine = row(sim, iid)["machine_id"]
    [host] = FailedHosts(store).active(AGENT, router.now())
    assert host.machine_id == machine
    word = "3 jobs failed in a row" if fault == "failing" else "Curio rejected 2 of its proofs"
    assert word in host.reason, host.reason
    kind = "not_proving" if fault == "failing" else "rejected"
    assert ProverTracks(store).load(AGENT)[iid].failure_recorded == kind


async def test_a_stale_witness_is_unknown_and_destroys_nothing(
    routed: FleetActivities, sim: SimServer, store: Store
) -> None:
    first = _rent(sim, 1)
    await _running(routed, sim, first)
    router = Router(store, sim)
    router.write(witness(first, done=4, in_flight=1, busy_seconds=1200))
    await _poll(routed, sim, 0)
    # The router stops writing; a machine rented since has no witness at all.
    later = _rent(sim, 2)
    snap = await _running(routed, sim, later)
    for _ in range(40):
        snap = await _poll(routed, sim)
    assert [_row(snap, i).state for i in (first, later)] == ["running", "running"]
    assert FailedHosts(store).active(AGENT, router.now()) == []
    assert triage([r.model_dump() for r in snap.instances])[0] == []
    for iid in (first, later):
        assert "unknown: the router last wrote" in _row(snap, iid).prover
    # The router writes again: the machine without a witness is judged again.
    router.write(witness(first, done=9, in_flight=1, busy_seconds=1500))
    snap = await _poll(routed, sim, 0)
    assert "the router has not witnessed it yet" in _row(snap, later).prover
    # Starting, not failing: a member that joined at this poll has no
    # witness until the router's next write.
    assert _row(snap, later).prover.startswith("starting"), _row(snap, later).prover


async def test_a_member_the_router_never_witnesses_starts_then_is_not_proving(
    routed: FleetActivities, sim: SimServer, store: Store
) -> None:
    """A member joins at a poll before the router has written of it: it
    reads as starting (not failing). Never witnessed, its not-proving time
    runs out and it is replaced like any machine that does not prove."""
    seen, unseen = _rent(sim, 1), _rent(sim, 2)
    await _running(routed, sim, seen, unseen)
    router = Router(store, sim)
    done = 0
    for minutes in range(0, 200, 10):
        done += 3
        sim.market.advance(0 if minutes == 0 else 600)
        router.write(witness(seen, done=done, in_flight=1, busy_seconds=60.0 * minutes))
        snap = await _poll(routed, sim, 0)
        if minutes == 0:
            assert _row(snap, unseen).prover.startswith("starting"), _row(snap, unseen)
            assert triage([r.model_dump() for r in snap.instances])[0] == []
        destroy, _ = triage([r.model_dump() for r in snap.instances])
        if destroy:
            break
    assert [i for i, _ in destroy] == [unseen], (minutes, _row(snap, unseen).model_dump())
    assert _row(snap, unseen).state == "not_proving" and minutes >= 20  # not_proving_minutes


async def test_a_drain_goes_through_the_router(
    routed: FleetActivities, sim: SimServer, store: Store
) -> None:
    iid, other = _rent(sim, 1), _rent(sim, 2)
    await _running(routed, sim, iid, other)
    router = Router(store, sim)
    busy = witness(iid, done=6, in_flight=2, busy_seconds=1800)
    router.write(busy, witness(other, done=1, in_flight=1, busy_seconds=300))
    await _poll(routed, sim, 0)
    asked = router.now()
    result = await ActivityEnvironment().run(
        routed.destroy_instance, _req("destroy_instance", {"instance_id": iid, "reason": "x"})
    )
    assert result.content.startswith(f"Draining instance {iid}") and "router" in result.content
    drains = {m.instance_id: m for m in RouterMembers(store).load(AGENT)}
    assert drains[iid].want == "drain" and drains[other].want == "serve"
    assert drains[iid].drain_by == asked + timedelta(seconds=DRAIN_LIMIT_S)
    answer, status = sim.market.prover_endpoint(iid)
    assert answer == "ok" and status is not None and not status.get("draining"), "no word to it"
    # Still draining at the router: kept, shown draining, no capacity; the
    # monitor's writes keep the drain.
    sim.market.advance(30)
    router.write(busy.model_copy(update={"phase": "draining"}))
    snap = await _poll(routed, sim, 0)
    assert _row(snap, iid).draining and _row(snap, iid).expected_proofs_per_hour == 0
    assert {m.instance_id: m.want for m in RouterMembers(store).load(AGENT)}[iid] == "drain"
    assert row(sim, iid)["cur_state"] == "running"
    sim.market.advance(30)
    router.write(busy.model_copy(update={"phase": "drained", "in_flight": 0, "done": 8}))
    snap = await _poll(routed, sim, 0)
    assert all(r.id != iid for r in snap.instances), "destroyed once drained"
    assert [m.instance_id for m in RouterMembers(store).load(AGENT)] == [other]


async def test_a_drain_ends_at_its_bound_whatever_the_router_says(
    routed: FleetActivities, sim: SimServer, store: Store
) -> None:
    iid = _rent(sim, 1)
    await _running(routed, sim, iid)
    router = Router(store, sim)
    router.write(witness(iid, done=6, in_flight=1, busy_seconds=1800))
    await _poll(routed, sim, 0)
    result = await ActivityEnvironment().run(
        routed.destroy_instance, _req("destroy_instance", {"instance_id": iid, "reason": "x"})
    )
    assert result.content.startswith(f"Draining instance {iid}")
    for _ in range(int(DRAIN_LIMIT_S // 60) - 1):
        sim.market.advance(60)
        router.write(witness(iid, "draining", done=6, in_flight=1, busy_seconds=1800))
        snap = await _poll(routed, sim, 0)
        assert any(r.id == iid for r in snap.instances)
    sim.market.advance(61)
    router.write(witness(iid, "draining", done=6, in_flight=1, busy_seconds=1800))
    snap = await _poll(routed, sim, 0)
    assert all(r.id != iid for r in snap.instances), "destroyed at drain_by"


async def test_the_router_queue_is_a_demand_reading(store: Store, sim: SimServer) -> None:
    router = Router(store, sim)
    router.queue = RouterQueue(
        at=router.now(), pending={"porep": 3, "snap": 1}, in_flight=2, completed=10, failed=1
    )
    router.write()
    with pytest.raises(SettingsError):  # the store is where it reads: no URL
        DemandEnv.load({"FLEET_DEMAND_SOURCE": "router", "FLEET_DEMAND_URL": "http://x.example"})
    env = DemandEnv.load({"FLEET_DEMAND_SOURCE": "router"})
    clock = router.now
    demand = DemandActivities(source_from_env(env)).with_store(store)
    demand._source._clock = clock  # type: ignore[attr-defined]  # the market's clock
    result = await ActivityEnvironment().run(demand.read_demand, DemandReadRequest(agent_id=AGENT))
    reading = result.reading
    assert reading is not None, result.refusal
    assert (reading.queued, reading.in_flight) == (4, 2)
    assert (reading.arrived_total, reading.done_total) == (17, 10)
    assert reading.source == "router"
    other = await ActivityEnvironment().run(
        demand.read_demand, DemandReadRequest(agent_id="another")
    )
    assert other.reading is None, "another agent's router wrote nothing"
    sim.market.advance(31)
    stale = await ActivityEnvironment().run(demand.read_demand, DemandReadRequest(agent_id=AGENT))
    assert stale.reading is None and "31 s old" in stale.refusal
