"""No row credits the spend ledger (issue 51, finding 8): a host whose row
states negative prices and traffic counters, performed through the
simulator over HTTP with the real client and activities; and the ledger's
own floor, for a row read around the parser."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import AgentConfig, PollRequest
from fleet_agent.store import SpendLedger, Store, TrendReads
from fleet_agent.vast.models import Instance
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers.spend import AGENT, create_instance, first_offer, live_instances, sim, tools

__all__ = ["sim", "tools"]  # the fixtures, imported for pytest

#: Every cost and counter a hostile host could turn negative.
HOSTILE = {
    "dph_total": -50.0,
    "storage_total_cost": -50.0,
    "inet_down_cost": -10.0,
    "inet_up_cost": -10.0,
    "inet_down_billed": -1e9,
    "inet_up_billed": -1e9,
}


def _charge(sim: SimServer, iid: int, key: str) -> float:
    (charge,) = [c for c in sim.market.charges()["instances"] if int(c["id"]) == iid]
    return float(charge[key])


def _usd(store: Store) -> float:
    (line,) = SpendLedger(store).instances(AGENT)
    return line.usd


async def test_negative_costs_on_a_row_credit_nothing_and_lose_nothing(
    tools: FleetActivities, sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    configs.config = AgentConfig(min_release_age_minutes=0)
    offer = await first_offer(tools)
    assert (await create_instance(tools, offer["offer_id"])).mutating
    (iid,) = live_instances(sim)
    env = ActivityEnvironment()
    poll = PollRequest(agent_id=AGENT)
    await env.run(tools.poll_fleet, poll)
    sim.market.advance(240)  # booting: the parameters' download starts
    await env.run(tools.poll_fleet, poll)

    sim.market.hostile_host(iid, row=HOSTILE)
    fetched = _charge(sim, iid, "download_gb")
    (read,) = await tools._vast.list_instances()
    assert read.id == iid and all(getattr(read, key) is None for key in HOSTILE), read
    seen = [_usd(store)]
    for _ in range(3):  # the download goes on while the row lies
        sim.market.advance(600)
        await env.run(tools.poll_fleet, poll)
        seen.append(_usd(store))
    assert seen == sorted(seen), f"the ledger went down: {seen}"
    hours = TrendReads(store).spend_hours_since(AGENT, datetime(2000, 1, 1, tzinfo=UTC))
    assert hours and all(h.usd >= 0 for h in hours)

    # Honest again: the traffic held while its price was unknown is billed
    # now, and the ledger is the simulator's bill to the cent.
    assert _charge(sim, iid, "download_gb") > fetched + 1, "it downloaded meanwhile"
    sim.market.hostile_host(iid, row={})
    sim.market.advance(600)
    await env.run(tools.poll_fleet, poll)
    assert _usd(store) == pytest.approx(_charge(sim, iid, "total_usd"), rel=1e-6)


def test_the_ledger_floors_what_a_row_read_around_the_parser_says(store: Store) -> None:
    """Built around the parser, as a row read before it cleaned costs: the
    ledger's own guard (fleet_agent/store/spend.py, billing.py)."""
    t0 = datetime(2026, 4, 1, 12, 0, tzinfo=UTC)
    honest = Instance.model_validate(
        {
            "id": 7,
            "label": f"fleet-agent/{AGENT}/r1-0000000007",
            "actual_status": "running",
            "dph_total": 0.5,
            "storage_total_cost": 0.05,
            "inet_down_cost": 0.01,
            "inet_down_billed": 1024.0 * 1024.0,  # 1 GB so far
            "start_date": t0.timestamp(),
        }
    )
    ledger = SpendLedger(store)
    ledger.accrue(AGENT, [honest], t0 + timedelta(hours=1))
    before = _usd(store)
    assert before == pytest.approx(0.5 + 0.01)
    # Stopped, a negative storage price and a negative download price, while
    # the counter says 4 GB more came down.
    lying = Instance.model_construct(
        **{
            **honest.model_dump(),
            "actual_status": "stopped",
            "storage_total_cost": -50.0,
            "inet_down_cost": -10.0,
            "inet_down_billed": 5 * 1024.0 * 1024.0,
        }
    )
    ledger.accrue(AGENT, [lying], t0 + timedelta(hours=2))
    (line,) = ledger.instances(AGENT)
    assert line.usd == pytest.approx(before) and line.dph == 0.0, line
    hours = TrendReads(store).spend_hours_since(AGENT, t0)
    assert all(h.usd >= 0 for h in hours), hours
