"""A run's view of the fleet from a recent listing (activities/fleet_views.py):
served at once rather than behind a walk of the whole account, yet never
hiding a change of the agent's fleet, whichever worker made it. Two workers'
fleet activities (each its own vast.ai client, so its own listing) on one
store, against the simulator over HTTP."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Iterator
from functools import partial

import pytest
import pytest_asyncio
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.config.settings import ProverSpec
from fleet_agent.models import AgentConfig, PollRequest
from fleet_agent.store import SpendLedger, Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from testkit.sim_helpers import SIM_RAM_GIB, steady_sim
from tests.helpers import tool_request

AGENT, OTHER = "recent-x", "recent-y"
CONFIG = AgentConfig(target_proofs_per_hour=50, min_release_age_minutes=0)
_req = partial(tool_request, AGENT)


@pytest.fixture
def sim() -> Iterator[SimServer]:
    # Real time (speed 1): the journal dates changes on the fleet's clock and
    # the listing its walks on the worker's, and in production both run.
    with steady_sim(5, speed=1) as server:
        yield server


def _worker(sim: SimServer) -> VastClient:
    # A TTL far below the test's steps: every view after the first is past
    # it, so only the staleness limit (a minute) decides what is served.
    return VastClient(
        sim.api_key,
        sim.url,
        timeout=5,
        backoff_base=0.01,
        pacing=NO_PACING,
        list_ttl_s=1e-6,
        list_stale_s=60,
    )


@pytest_asyncio.fixture
async def workers(
    sim: SimServer, store: Store
) -> AsyncIterator[tuple[FleetActivities, FleetActivities, VastClient]]:
    configs = StaticConfigs(CONFIG)
    async with _worker(sim) as a, _worker(sim) as b:
        yield (
            FleetActivities(
                a,
                ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
                store=store,
                configs=configs,
                clock=sim.market.now,
            ),
            FleetActivities(
                b,
                ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
                store=store,
                configs=configs,
                clock=sim.market.now,
            ),
            a,
        )


def _ids(text: str) -> set[int]:
    return {int(m) for m in re.findall(r'"id": ?(\d+)', text)}


async def _rent_one(fleet: FleetActivities) -> int:
    found = await ActivityEnvironment().run(
        fleet.search_offers, _req("search_offers", {"limit": 1})
    )
    offer_id = int(re.findall(r'"offer_id": ?(\d+)', found.content)[0])
    made = await ActivityEnvironment().run(
        fleet.create_instance, _req("create_instance", {"offer_id": offer_id, "reason": "t"})
    )
    assert made.mutating, made.content
    return int(re.findall(r"instance (\d+)", made.content)[0])


async def test_another_workers_rental_is_in_the_next_view_however_recent_ours_is(
    workers: tuple[FleetActivities, FleetActivities, VastClient],
) -> None:
    a, b, a_vast = workers
    assert _ids(await a.snapshot_text(AGENT, CONFIG)) == set()  # a's first walk
    # An agent whose fleet did not change is served a's listing at once.
    await a.snapshot_text(OTHER, CONFIG)
    assert a_vast.listing.stale == 1
    rented = await _rent_one(b)  # worker b: a's listing knows nothing of it
    # The journal dates the change after every walk of a's that began before
    # it, so a's view walks again rather than hide the machine.
    assert rented in _ids(await a.snapshot_text(AGENT, CONFIG))
    # Once a walk began after the change, it serves stale again.
    before = a_vast.listing.stale
    assert rented in _ids(await a.snapshot_text(AGENT, CONFIG))
    assert a_vast.listing.stale == before + 1


async def test_a_slow_journal_read_does_not_date_the_change_later(
    workers: tuple[FleetActivities, FleetActivities, VastClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The change's age is taken when the listing is asked, not before the
    # journal's read: a read that took longer than the walk after the change
    # was slow to start made that walk look older than the change, and every
    # later view walked the account again (seen under load in make test).
    a, b, a_vast = workers
    await a.snapshot_text(AGENT, CONFIG)
    rented = await _rent_one(b)
    assert rented in _ids(await a.snapshot_text(AGENT, CONFIG))  # walks after the change
    journal = a._views._journal
    read = journal.last_change

    def slow(*args: object) -> object:
        time.sleep(0.5)
        return read(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(journal, "last_change", slow)
    before, walks = a_vast.listing.stale, a_vast.listing.walks
    assert rented in _ids(await a.snapshot_text(AGENT, CONFIG))
    assert a_vast.listing.stale == before + 1
    assert a_vast.listing.walks == walks + 1  # the one started for whoever comes next


async def test_a_view_served_stale_is_not_accrued_and_the_monitors_poll_is(
    sim: SimServer,
    store: Store,
    workers: tuple[FleetActivities, FleetActivities, VastClient],
) -> None:
    a, b, a_vast = workers
    rented = await _rent_one(b)
    await a.snapshot_text(AGENT, CONFIG)  # fresh: the change is newer than any walk
    ledger = SpendLedger(store)
    (first,) = ledger.instances(AGENT)
    sim.market.advance(600)
    await a.snapshot_text(AGENT, CONFIG)
    assert a_vast.listing.stale >= 1
    (still,) = ledger.instances(AGENT)
    assert still.accrued_until == first.accrued_until  # a stale listing bills nothing
    # The monitor's poll always lists afresh and accrues up to now.
    poll = PollRequest(agent_id=AGENT, target_proofs_per_hour=50, min_release_age_minutes=0)
    snap = await ActivityEnvironment().run(a.poll_fleet, poll)
    assert [i.id for i in snap.instances] == [rented]
    (polled,) = ledger.instances(AGENT)
    assert (polled.accrued_until - first.accrued_until).total_seconds() == pytest.approx(600, abs=1)
