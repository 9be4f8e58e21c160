"""The approval gates at the tool (simulator over HTTP, the real activities):
which creates and destroys wait for an operator, the capacity floor of
`min_fleet_fraction`, and a granted call that goes through."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.llm.prompt import limits_text
from fleet_agent.models import AgentConfig, ApprovalDecision, ConfigPatch, ToolResult
from fleet_agent.store import Store, ToolJournal
from simulator.server import SimServer
from testkit.fakes.configs import StaticConfigs
from tests.helpers import tool_request

AGENT = "gates-test"
_req = partial(tool_request, AGENT)
GRANT = ApprovalDecision(
    approval_id="a1-1", approve=True, author="alice", at=datetime(2026, 11, 29, tzinfo=UTC)
)


async def _offers(tools: FleetActivities, n: int) -> list[dict[str, Any]]:
    found = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"limit": n})
    )
    rows: list[dict[str, Any]] = json.loads(found.content.split("\n", 1)[1])
    assert len(rows) >= n, found.content
    return rows[:n]


async def _create(tools: FleetActivities, offer: int, **extra: Any) -> ToolResult:
    req = _req("create_instance", {"offer_id": offer, "reason": "r"}).model_copy(update=extra)
    return await ActivityEnvironment().run(tools.create_instance, req)


async def _destroy(tools: FleetActivities, iid: int, **extra: Any) -> ToolResult:
    req = _req("destroy_instance", {"instance_id": iid, "reason": "r"}).model_copy(update=extra)
    return await ActivityEnvironment().run(tools.destroy_instance, req)


async def test_creates_above_the_thresholds_wait_for_an_approval_and_a_grant_rents(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs, store: Store
) -> None:
    cheap, dear = await _offers(tools, 2)
    # off: nothing asks, whatever the thresholds.
    configs.config = AgentConfig(approval_mode="off", approval_above_dph=0.0)
    assert (await _create(tools, cheap["offer_id"])).mutating
    # threshold on the offer's price: asks, rents nothing, journals nothing.
    configs.config = AgentConfig(approval_mode="threshold", approval_above_dph=0.01)
    asked = await _create(tools, dear["offer_id"])
    assert asked.approval is not None and not asked.mutating and not asked.is_error
    assert "above approval_above_dph $0.01/h" in asked.approval.reason
    assert asked.approval.dph == pytest.approx(dear["dph"], rel=1e-3)
    assert len(sim.market.instance_ids()) == 1
    assert ToolJournal(store).get(AGENT, asked.tool_use_id) is None
    # The same call, granted: rented, and journalled.
    granted = await ActivityEnvironment().run(
        tools.create_instance,
        _req(
            "create_instance",
            {"offer_id": dear["offer_id"], "reason": "r"},
            tool_id=asked.tool_use_id,
        ).model_copy(update={"approval": GRANT}),
    )
    assert granted.mutating and granted.approval is None, granted.content
    assert len(sim.market.instance_ids()) == 2
    record = ToolJournal(store).get(AGENT, asked.tool_use_id)
    assert record is not None and record.result is not None


async def test_the_fleet_increase_over_an_hour_adds_up_across_creates(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    # The same offer is rented an hour later: no other renter takes it meanwhile.
    sim.market.set_faults(offer_churn=False)
    offers = await _offers(tools, 3)
    first_two = sum(o["dph"] for o in offers[:2])
    configs.config = AgentConfig(
        approval_mode="threshold",
        approval_above_dph=100,
        approval_above_fleet_dph_increase=first_two + offers[2]["dph"] / 2,
    )
    assert (await _create(tools, offers[0]["offer_id"])).mutating
    assert (await _create(tools, offers[1]["offer_id"])).mutating
    third = await _create(tools, offers[2]["offer_id"])
    assert third.approval is not None, third.content
    assert "more than an hour ago" in third.approval.reason
    # An hour later the first two are the baseline: the same rental passes.
    sim.market.advance(3700)
    assert (await _create(tools, offers[2]["offer_id"])).mutating


async def test_always_asks_for_every_change(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    (offer,) = await _offers(tools, 1)
    assert (await _create(tools, offer["offer_id"])).mutating
    (iid,) = sim.market.instance_ids()
    configs.config = AgentConfig(approval_mode="always", min_release_age_minutes=0)
    asked = await _destroy(tools, iid)
    assert asked.approval is not None and asked.approval.reason == "approval_mode is always"
    assert asked.approval.dph < 0 and iid in sim.market.instance_ids()
    assert (await _destroy(tools, iid, approval=GRANT)).mutating
    assert iid not in sim.market.instance_ids()


async def test_the_capacity_floor_refuses_or_asks_but_a_failed_machine_may_go(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    for offer in await _offers(tools, 2):
        assert (await _create(tools, offer["offer_id"])).mutating
    healthy, failing = sorted(sim.market.instance_ids())
    # A target far above the fleet: any healthy machine released takes it
    # further below half the target.
    configs.config = AgentConfig(target_proofs_per_hour=10_000, min_release_age_minutes=0)
    refused = await _destroy(tools, healthy)
    assert refused.is_error and refused.approval is None, refused.content
    assert "below min_fleet_fraction 0.5 × target 10000" in refused.content
    assert "approval_mode is off" in refused.content and "Nothing was destroyed" in refused.content
    assert healthy in sim.market.instance_ids()

    configs.config = configs.config.model_copy(update={"approval_mode": "threshold"})
    asked = await _destroy(tools, healthy)
    assert asked.approval is not None and "min_fleet_fraction" in asked.approval.reason
    assert healthy in sim.market.instance_ids()

    # A dead machine is not capacity: no floor, no approval.
    sim.market.kill(failing, "offline")
    gone = await _destroy(tools, failing)
    assert gone.mutating and gone.approval is None, gone.content

    # A floor of 0 lets the healthy one go without asking.
    configs.config = configs.config.model_copy(update={"min_fleet_fraction": 0.0})
    assert (await _destroy(tools, healthy)).mutating


@pytest.mark.parametrize(
    "raw",
    [
        {"approval_mode": "sometimes"},
        {"approval_mode": True},
        {"approval_above_dph": -1},
        {"approval_above_fleet_dph_increase": "5"},
        {"approval_timeout_seconds": 10},
        {"approval_timeout_seconds": 100_000},
        {"min_fleet_fraction": 1.5},
        {"min_fleet_fraction": -0.1},
    ],
)
def test_bad_approval_settings_are_refused(raw: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ConfigPatch.model_validate(raw)


def test_the_run_deadline_allows_for_one_approval_window() -> None:
    assert AgentConfig().run_deadline_seconds() == 1_800
    waiting = AgentConfig(approval_mode="threshold", approval_timeout_seconds=600)
    assert waiting.run_deadline_seconds() == 2_400


def test_the_runs_limits_tell_the_model_what_waits_for_an_operator() -> None:
    off = limits_text(AgentConfig())
    assert "daily budget of $500" in off and "refused: a release that leaves" in off
    threshold = limits_text(AgentConfig(approval_mode="threshold", approval_above_dph=1.5))
    assert "approval is needed for a create above $1.5/h" in threshold
    assert "every create and destroy waits" in limits_text(AgentConfig(approval_mode="always"))
    assert "refused" not in limits_text(AgentConfig(min_fleet_fraction=0))
