"""Who writes the spend ledger, and the daily budget at the create tool: the
real activities against the simulator over HTTP, on a sim clock that starts
at a known hour of a UTC day."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
import pytest_asyncio
from pydantic import ValidationError
from temporalio.testing import ActivityEnvironment

from activities import fleet_stop
from activities.fleet import FleetActivities
from fleet_agent.fleet.budget import budget_refusal, hours_to_midnight
from fleet_agent.models import (
    AgentConfig,
    ConfigPatch,
    PollRequest,
    SpendSummary,
    StopFleetRequest,
)
from fleet_agent.settings import ProverSpec
from fleet_agent.sim import SimServer
from fleet_agent.store import SpendLedger, Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from tests.fakes.configs import StaticConfigs
from tests.helpers import tool_request

AGENT = "spend-test"
# 12:00 UTC: twelve hours to midnight.
NOON = datetime(2026, 4, 1, 12, 0, tzinfo=UTC)
_req = partial(tool_request, AGENT)


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(
        seed=11,
        speed=0,
        scenario="ideal",
        offers=2000,
        rate_limits=False,
        start_epoch=NOON.timestamp(),
    ) as server:
        server.market.set_faults(offer_churn=False)  # offers stay while the clock runs
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
            ProverSpec(allow_loopback=True),
            store=store,
            configs=configs,
            clock=sim.market.now,
        )


async def _offers(tools: FleetActivities, n: int) -> list[dict[str, Any]]:
    found = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"limit": n})
    )
    rows: list[dict[str, Any]] = json.loads(found.content.split("\n", 1)[1])
    assert len(rows) >= n, found.content
    return rows[:n]


async def _create(tools: FleetActivities, offer_id: int) -> Any:
    return await ActivityEnvironment().run(
        tools.create_instance, _req("create_instance", {"offer_id": offer_id, "reason": "r"})
    )


def _charged(sim: SimServer) -> dict[int, float]:
    return {int(c["id"]): c["total_usd"] for c in sim.market.charges()["instances"]}


def _spent(store: Store) -> dict[int, float]:
    return {i.instance_id: i.usd for i in SpendLedger(store).instances(AGENT)}


# ------------------------------------------------------------------ the key


@pytest.mark.parametrize(
    "raw",
    [
        {"daily_budget_usd": -1},
        {"daily_budget_usd": -0.01},
        {"daily_budget_usd": "100"},
        {"daily_budget_usd": True},
        {"daily_budget_usd": 1_000_000.5},
        {"daily_budget_usd": float("nan")},
        {"daily_budget_usd": [100]},
    ],
)
def test_bad_daily_budgets_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as err:
        ConfigPatch.model_validate(raw)
    assert "daily_budget_usd" in str(err.value)


def test_the_daily_budget_defaults_to_500_and_takes_0_and_integers() -> None:
    assert AgentConfig().daily_budget_usd == 500.0
    assert (
        ConfigPatch.model_validate({"daily_budget_usd": 0}).apply(AgentConfig()).daily_budget_usd
        == 0
    )
    patched = ConfigPatch.model_validate({"daily_budget_usd": 1_000_000}).apply(AgentConfig())
    assert patched.daily_budget_usd == 1_000_000


def test_the_budget_rule() -> None:
    spend = SpendSummary(as_of=NOON + timedelta(hours=6), today_usd=10.0, current_dph=2.0)
    assert hours_to_midnight(spend.as_of) == 6.0
    assert hours_to_midnight(datetime(2026, 4, 2, tzinfo=UTC)) == 24.0
    assert budget_refusal(spend, 1.0, 28.0) is None, "10 + 3 x 6 = 28 fits exactly"
    refusal = budget_refusal(spend, 1.0, 27.99)
    assert refusal is not None
    for figure in ("$10.00 spent today", "fleet $2.000/h", "this offer $1.000/h", "6.00 h"):
        assert figure in refusal
    assert "= $28.00, over daily_budget_usd=$27.99" in refusal and "Nothing was rented" in refusal


# ------------------------------------------------------------------ the tool


async def test_a_create_past_the_daily_budget_is_refused_with_the_figures(
    tools: FleetActivities, sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    first, second = await _offers(tools, 2)
    dph = first["dph"]
    # Twelve hours of the first machine fit; nothing more does, an hour later.
    configs.config = AgentConfig(
        min_release_age_minutes=0, daily_budget_usd=round(dph * 12 + 0.01, 4)
    )
    made = await _create(tools, first["offer_id"])
    assert made.mutating and not made.is_error, made.content
    sim.market.advance(3600)  # no poll meanwhile: the tool accrues the fleet itself
    refused = await _create(tools, second["offer_id"])
    assert refused.is_error and not refused.mutating and refused.dph_delta == 0
    assert refused.content.startswith("Refused by the daily budget"), refused.content
    assert "Nothing was rented" in refused.content
    (iid,) = sim.market.instance_ids()
    spent_today = _charged(sim)[iid]  # rented at noon: all of it today
    assert f"${spent_today:.2f} spent today" in refused.content, (spent_today, refused.content)
    assert f"this offer ${second['dph']:.3f}/h" in refused.content
    assert "11.00 h until midnight UTC" in refused.content
    # Raised by the operator: the same offer is rented.
    configs.config = AgentConfig(min_release_age_minutes=0, daily_budget_usd=500)
    assert (await _create(tools, second["offer_id"])).mutating


async def test_create_opens_destroy_closes_and_the_results_carry_the_dph(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    env = ActivityEnvironment()
    (offer,) = await _offers(tools, 1)
    made = await _create(tools, offer["offer_id"])
    (iid,) = sim.market.instance_ids()
    assert made.dph_delta == pytest.approx(offer["dph"], abs=1e-4)
    (line,) = SpendLedger(store).instances(AGENT)
    assert line.instance_id == iid and line.ended_at is None
    sim.market.advance(1800)
    status = await env.run(tools.get_fleet_status, _req("get_fleet_status", {}))
    spend_line = status.content.rsplit("\n", 1)[1]
    assert re.match(r"Spend: today \$\d+\.\d\d \(budget \$500\.00\), 24 h", spend_line)
    assert f"now ${made.dph_delta:.3f}/h" in spend_line
    sim.market.advance(1800)
    gone = await env.run(
        tools.destroy_instance, _req("destroy_instance", {"instance_id": iid, "reason": "r"})
    )
    assert gone.mutating and gone.dph_delta == pytest.approx(-made.dph_delta)
    sim.market.advance(3600)  # nothing more is billed
    await env.run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    (line,) = SpendLedger(store).instances(AGENT)
    assert line.closed_by == "destroyed" and line.ended_at == NOON + timedelta(hours=1)
    assert line.usd == pytest.approx(_charged(sim)[iid], rel=1e-6)


async def test_the_poll_accrues_and_the_freeze_closes_what_it_destroys(
    tools: FleetActivities,
    sim: SimServer,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fleet_stop, "CHECK_EVERY_S", 0.05)
    env = ActivityEnvironment()
    for offer in await _offers(tools, 3):
        assert (await _create(tools, offer["offer_id"])).mutating
    for _ in range(6):
        sim.market.advance(600)
        await env.run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    assert _spent(store) == pytest.approx(_charged(sim), rel=1e-6)
    report = await env.run(tools.stop_fleet, StopFleetRequest(agent_id=AGENT, destroy_all=True))
    assert sorted(report.destroyed) == sorted(_charged(sim))
    sim.market.advance(3600)
    await env.run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    lines = SpendLedger(store).instances(AGENT)
    assert {line.closed_by for line in lines} == {"destroyed"}
    assert _spent(store) == pytest.approx(_charged(sim), rel=1e-6)
    summary = SpendLedger(store).summary(AGENT, NOON + timedelta(hours=2))
    assert summary.current_dph == 0 and summary.open_instances == 0
    assert summary.today_usd == pytest.approx(sum(_charged(sim).values()), rel=1e-6)
