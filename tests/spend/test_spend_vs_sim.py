"""The spend ledger against the simulator's own accounting, over simulated hours.

The real fleet activities against the simulator over HTTP, on a sim clock
that crosses midnight UTC: machines rented by the create tool, one stopped
by its host between two polls and started again later, one released by the
destroy tool, and a gap in the monitor's polls (the worker was away) during
which a machine was rented that the ledger never saw (a zombie rental
landing) and another was destroyed by the tool. The ledger must match the
simulator's bill within 1 %.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.config.settings import ProverSpec
from fleet_agent.fleet.labels import create_label
from fleet_agent.models import PollRequest
from fleet_agent.store import SpendLedger, Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from testkit.sim_helpers import SIM_RAM_GIB, rent, steady_sim
from tests.helpers import tool_request

AGENT = "ledger-vs-sim"
START = datetime(2026, 4, 1, 22, 10, tzinfo=UTC)  # the day changes 1 h 50 min in
POLL_S = 120
_req = partial(tool_request, AGENT)


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with steady_sim(23, START) as server:
        yield server


@pytest_asyncio.fixture
async def tools(
    sim: SimServer, store: Store, configs: StaticConfigs
) -> AsyncIterator[FleetActivities]:
    async with VastClient(
        sim.api_key, sim.url, timeout=2, backoff_base=0.01, pacing=NO_PACING
    ) as vast:
        yield FleetActivities(
            vast,
            ProverSpec(mode="curio_on_host", allow_loopback=True, min_host_ram_gib=SIM_RAM_GIB),
            store=store,
            configs=configs,
            clock=sim.market.now,
        )


class Fleet:
    """Drives the tools and the monitor's poll against the sim clock."""

    def __init__(self, tools: FleetActivities, sim: SimServer) -> None:
        self.tools, self.sim, self.env = tools, sim, ActivityEnvironment()

    async def offers(self, n: int) -> list[dict[str, Any]]:
        found = await self.env.run(self.tools.search_offers, _req("search_offers", {"limit": n}))
        rows: list[dict[str, Any]] = json.loads(found.content.split("\n", 1)[1])
        assert len(rows) >= n, found.content
        return rows[:n]

    async def create(self, offer_id: int) -> int:
        before = set(self.sim.market.instance_ids())
        made = await self.env.run(
            self.tools.create_instance,
            _req("create_instance", {"offer_id": offer_id, "reason": "r"}),
        )
        assert made.mutating, made.content
        (iid,) = set(self.sim.market.instance_ids()) - before
        return iid

    async def destroy(self, iid: int) -> None:
        gone = await self.env.run(
            self.tools.destroy_instance,
            _req("destroy_instance", {"instance_id": iid, "reason": "r"}),
        )
        assert gone.mutating and gone.dph_delta < 0, gone.content

    async def poll_for(self, seconds: int) -> None:
        for _ in range(seconds // POLL_S):
            self.sim.market.advance(POLL_S)
            await self.env.run(self.tools.poll_fleet, PollRequest(agent_id=AGENT))


def _bill(sim: SimServer) -> dict[int, dict[str, Any]]:
    return {int(c["id"]): c for c in sim.market.charges()["instances"]}


async def test_the_ledger_matches_the_simulators_bill_within_one_percent(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    fleet = Fleet(tools, sim)
    *first, later = await fleet.offers(4)
    a, b, c = [await fleet.create(o["offer_id"]) for o in first]
    await fleet.poll_for(3600)
    sim.market.advance(50)  # the host stops B between two polls
    assert sim.market.set_instance_state(b, "stop")
    await fleet.poll_for(3600)
    await fleet.destroy(a)
    await fleet.poll_for(1800)
    # The worker is away: no polls for 90 minutes.
    sim.market.advance(900)
    # A rental lands that the ledger never sees (a zombie create, say).
    d = rent(sim, later["offer_id"], label=create_label(AGENT, 9, "toolu_zombie"))
    sim.market.advance(1800)
    await fleet.destroy(c)  # released while the monitor was away
    sim.market.advance(2700)
    # Back: polls again; B is started again between two polls.
    await fleet.poll_for(3600)
    sim.market.advance(90)
    assert sim.market.set_instance_state(b, "start")
    await fleet.poll_for(3600)

    bill = _bill(sim)
    ledger = {i.instance_id: i for i in SpendLedger(store).instances(AGENT)}
    assert set(ledger) == set(bill) == {a, b, c, d}
    assert ledger[d].started_at.timestamp() == pytest.approx(bill[d]["started_at"], abs=1e-3)
    assert ledger[d].usd == pytest.approx(bill[d]["total_usd"], rel=1e-4), "gap filled"
    assert ledger[c].usd == pytest.approx(bill[c]["total_usd"], rel=1e-4), "known end"
    assert bill[b]["stopped_seconds"] > 4 * 3600
    assert {i: line.closed_by for i, line in ledger.items()} == {
        a: "destroyed",
        b: "",
        c: "destroyed",
        d: "",
    }
    ours = sum(line.usd for line in ledger.values())
    theirs = sum(row["total_usd"] for row in bill.values())
    error = (ours - theirs) / theirs
    print(f"ledger ${ours:.4f} vs simulator ${theirs:.4f}: {error:+.4%}")
    assert abs(error) < 0.01
    # The summary adds up the same hours: all of them in April and in the
    # last 24 h, only those after midnight today.
    summary = SpendLedger(store).summary(AGENT, datetime.fromtimestamp(sim.market.now(), UTC))
    assert summary.month_usd == pytest.approx(ours, rel=1e-6)
    assert summary.last_24h_usd == pytest.approx(ours, rel=1e-6)
    assert summary.today_usd < ours, "the hours before midnight were yesterday"
    assert summary.current_dph == pytest.approx(sim.market.state()["spend_per_hour"], abs=1e-3)


async def test_a_machine_destroyed_behind_our_back_is_closed_when_last_seen(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    """The documented shortfall: vast.ai lists no end for a machine destroyed
    elsewhere, so the ledger ends it at its last sighting."""
    fleet = Fleet(tools, sim)
    (offer,) = await fleet.offers(1)
    iid = await fleet.create(offer["offer_id"])
    await fleet.poll_for(3600)
    seen_last = sim.market.now()
    sim.market.advance(1800)
    sim.market.destroy_instance(iid)  # by hand, in the console
    await fleet.poll_for(600)
    (line,) = SpendLedger(store).instances(AGENT)
    assert line.closed_by == "vanished" and line.ended_at is not None
    assert line.ended_at.timestamp() == pytest.approx(seen_last, abs=1e-3)
    billed = _bill(sim)[iid]
    missed = billed["dph_total"] * 1800 / 3600
    assert line.usd == pytest.approx(billed["total_usd"] - missed, rel=1e-4)
