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
from fleet_agent.config.settings import ProverSpec
from fleet_agent.fleet.budget import budget_refusal
from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.models import (
    AgentConfig,
    ConfigPatch,
    PollRequest,
    StopFleetRequest,
)
from fleet_agent.store import SpendLedger, Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator import SimServer
from testkit.fakes.configs import StaticConfigs
from testkit.sim_helpers import SIM_RAM_GIB, steady_sim
from tests.helpers import tool_request

AGENT = "spend-test"
# 12:00 UTC: twelve hours to midnight.
NOON = datetime(2026, 4, 1, 12, 0, tzinfo=UTC)
_req = partial(tool_request, AGENT)


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with steady_sim(11, NOON) as server:
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


def _hours(first: datetime, *usd: float) -> list[tuple[datetime, float]]:
    """Ledger hours from `first` on, one `usd` figure each."""
    return [(first + timedelta(hours=k), x) for k, x in enumerate(usd)]


def test_the_budget_bounds_a_full_day_at_the_new_rate() -> None:
    # No spend yet: the fleet with the offer must fit 24 hours of the budget,
    # whatever the hour of the UTC day (the old rule projected to midnight only).
    for now in (NOON, NOON + timedelta(hours=11)):  # noon, and 23:00 UTC
        rule = partial(budget_refusal, [], now, fleet_dph=2.0, added_dph=1.0)
        assert rule(budget_usd=72.0) is None, "(2 + 1) x 24 = 72 fits exactly"
        refusal = rule(budget_usd=71.99)
        assert refusal is not None and refusal.startswith("Refused by the daily budget")
        for figure in ("fleet $2.000/h", "this offer $1.000/h", "× 24.00 h", "= $72.00"):
            assert figure in refusal, refusal
        assert "over daily_budget_usd=$71.99" in refusal and "Nothing was rented" in refusal


def test_a_fleet_rented_at_23_utc_cannot_run_through_the_next_day_over_budget() -> None:
    # The case: at 23:00 with nothing spent, a $3/h offer on a $50
    # budget. Projected to midnight it cost $3 and passed; a day of it is $72.
    late = NOON + timedelta(hours=11)
    refusal = budget_refusal([], late, fleet_dph=0.0, added_dph=3.0, budget_usd=50.0)
    assert refusal is not None and "= $72.00" in refusal


def test_spend_before_midnight_counts_in_the_window_across_it() -> None:
    # $5/h from 20:00 to 02:00 across midnight ($30), nothing running at
    # 03:00. A $1/h offer: the window from 20:00 holds $30 spent plus 17 h
    # to come = $47. Today's spend alone (since 00:00: $10) would let it pass.
    now = datetime(2026, 4, 2, 3, 0, tzinfo=UTC)
    hours = _hours(datetime(2026, 4, 1, 20, 0, tzinfo=UTC), *[5.0] * 6)
    rule = partial(budget_refusal, hours, now, fleet_dph=0.0, added_dph=1.0)
    refusal = rule(budget_usd=46.99)
    assert refusal is not None
    assert "from 2026-04-01 20:00 UTC, $30.00 spent since 20:00 UTC" in refusal, refusal
    assert "× 17.00 h = $47.00" in refusal
    assert rule(budget_usd=47.0) is None


def test_the_budget_fails_closed_on_a_nan_figure_and_counts_creates_in_flight() -> None:
    nan = float("nan")
    assert budget_refusal([], NOON, fleet_dph=nan, added_dph=1.0, budget_usd=1e6) is not None
    assert (
        budget_refusal(
            _hours(NOON, nan),
            NOON + timedelta(minutes=30),
            fleet_dph=0.0,
            added_dph=0.0,
            budget_usd=1e6,
        )
        is not None
    )
    rule = partial(budget_refusal, [], NOON, fleet_dph=1.0, added_dph=1.0, budget_usd=48.0)
    assert rule() is None
    flying = rule(in_flight_dph=0.5)
    assert flying is not None and "creates in flight $0.500/h" in flying


# ------------------------------------------------------------------ the tool


async def test_the_daily_budget_refuses_the_offer_just_over_and_rents_the_one_that_fits(
    tools: FleetActivities, sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    """An hour into a rental, the budget sits between the fleet with a
    cheaper offer and the fleet with a dearer one: the fleet alone fits, the
    dearer offer is refused by the budget (no other rule), the cheaper one is
    rented. With the offer left out of the sum, the dearer one would pass.
    Downloads count: the fleet's beside the ledger's rate, each offer's with
    its rental (`offer_dph`: rental plus `transfer_dph`)."""
    first, *others = await _offers(tools, 40)
    configs.config = AgentConfig(min_release_age_minutes=0)
    made = await _create(tools, first["offer_id"])
    assert made.mutating and not made.is_error, made.content
    sim.market.advance(3600)  # no poll meanwhile: the tool accrues the fleet itself
    (iid,) = sim.market.instance_ids()
    spent, rental = _charged(sim)[iid], made.dph_delta
    assert spent > rental  # the parameters' download is billed on top of the hour
    fleet = rental + first["transfer_dph"]

    def day(dph: float) -> float:
        """The worst 24 hours at `dph` from now on: the one from the rental
        (its hour spent, 23 h to come), when that beats a day from now."""
        return max(spent + dph * 23, dph * 24)

    # Offers whose worst window starts at the rental (so the refusal's
    # figures are known), one dearer than the other by at least a cent an hour.
    fitting = [o for o in others if fleet + offer_dph(o) < spent]
    cheap = fitting[0]
    dear = next(o for o in fitting if offer_dph(o) >= offer_dph(cheap) + 0.01)
    budget = round(day(fleet + offer_dph(dear)) - 0.05, 2)
    assert (
        day(fleet)
        < day(fleet + offer_dph(cheap))
        <= budget - 0.05
        < budget
        < day(fleet + offer_dph(dear))
    ), "the fleet alone and with the cheaper offer fit; with the dearer one it does not"
    configs.config = AgentConfig(min_release_age_minutes=0, daily_budget_usd=budget)

    refused = await _create(tools, dear["offer_id"])
    assert refused.is_error and not refused.mutating and refused.dph_delta == 0
    assert refused.content.startswith("Refused by the daily budget"), refused.content
    assert "Nothing was rented" in refused.content
    assert sim.market.instance_ids() == [iid]
    assert f"from 2026-04-01 12:00 UTC, ${spent:.2f} spent since 12:00 UTC" in refused.content
    figures = re.search(
        r"\(fleet \$([\d.]+)/h \+ its downloads and unreadable rows \$([\d.]+)/h "
        r"\+ this offer \$([\d.]+)/h\) × 23\.00 h",
        refused.content,
    )
    assert figures is not None, refused.content
    ledger, downloads, offer = map(float, figures.groups())
    assert ledger == pytest.approx(rental, abs=1e-3)
    assert downloads == pytest.approx(first["transfer_dph"], abs=2e-3)
    assert offer == pytest.approx(offer_dph(dear), abs=2e-3) and offer > dear["dph"]
    assert f"over daily_budget_usd=${budget:.2f}" in refused.content
    assert "bounds any 24 hours" in refused.content

    rented = await _create(tools, cheap["offer_id"])
    assert rented.mutating and not rented.is_error, rented.content
    assert len(sim.market.instance_ids()) == 2


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
