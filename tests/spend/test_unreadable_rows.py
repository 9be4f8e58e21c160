"""A machine of ours whose vast.ai row does not parse still bills (issue 51,
finding 8): it counts against every cap at the cap's value, the model's
view, `fleet-agent fleet` and the log say so, and it can still be
destroyed. Performed against the real activities and the simulator over
HTTP (a host whose row turns hostile); a row without a usable id, which
the simulator does not serve, through a stub."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities import fleet_stop
from activities.fleet import FleetActivities
from fleet_agent.fleet.labels import create_label
from fleet_agent.fleet.offer_cost import offer_dph
from fleet_agent.fleet.reconcile import ReconcileRequest
from fleet_agent.models import AgentConfig, PollRequest, StopFleetRequest
from fleet_agent.store import SpendLedger, Store
from fleet_agent.vast.models import Instance
from simulator import SimServer
from starter.cli.fleet_render import fleet_text
from starter.views.fleet import Flag, read_fleet_view
from testkit.fakes.configs import StaticConfigs
from testkit.fakes.vast_stub import StubRequest, instances_page
from tests.helpers import tool_request
from tests.helpers.spend import (
    AGENT,
    create_instance,
    live_instances,
    priced_offers,
    sim,
    spend_req,
    tools,
)
from tests.helpers.vast_rows import instance_row, stub_tools

__all__ = ["sim", "tools"]  # the fixtures, imported for pytest

#: A host's hardware as no parser reads it: the row fails as a whole.
BROKEN = {"num_gpus": "two"}


async def _rent_one_and_break_its_row(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> tuple[int, dict[str, Any]]:
    """One machine rented and its row made unparseable; another offer."""
    (a, _), (b, _) = (await priced_offers(tools, sim))[:2]
    configs.config = AgentConfig(min_release_age_minutes=0)
    assert (await create_instance(tools, a["offer_id"])).mutating
    (iid,) = live_instances(sim)
    sim.market.hostile_host(iid, row=BROKEN)
    return iid, b


async def test_a_row_of_ours_that_does_not_parse_counts_at_every_cap(
    tools: FleetActivities, sim: SimServer, configs: StaticConfigs
) -> None:
    iid, b = await _rent_one_and_break_its_row(tools, sim, configs)
    await ActivityEnvironment().run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    # Its real rental is far under a dollar an hour: at the caps' value it is
    # one instance at max_instance_dph ($2/h) and downloads at the cap.
    room = offer_dph(b) + 1.0

    configs.config = AgentConfig(max_instances=1, min_release_age_minutes=0)
    refused = await create_instance(tools, b["offer_id"])
    assert refused.is_error and "already has 1 instances" in refused.content, refused.content

    configs.config = AgentConfig(max_fleet_dph=room, min_release_age_minutes=0)
    refused = await create_instance(tools, b["offer_id"])
    assert refused.is_error and "fleet spend would be" in refused.content, refused.content

    configs.config = AgentConfig(daily_budget_usd=24 * room, min_release_age_minutes=0)
    refused = await create_instance(tools, b["offer_id"])
    assert refused.content.startswith("Refused by the daily budget"), refused.content
    assert "unreadable rows $2." in refused.content
    assert live_instances(sim) == [iid]

    # Readable again, it counts at its own price: the same caps let b in.
    sim.market.hostile_host(iid, row={})
    configs.config = AgentConfig(
        max_instances=2, max_fleet_dph=room, daily_budget_usd=24 * room, min_release_age_minutes=0
    )
    made = await create_instance(tools, b["offer_id"])
    assert made.mutating and not made.is_error, made.content


async def test_the_model_the_fleet_view_and_the_log_say_so(
    tools: FleetActivities,
    sim: SimServer,
    store: Store,
    configs: StaticConfigs,
    caplog: pytest.LogCaptureFixture,
) -> None:
    iid, _ = await _rent_one_and_break_its_row(tools, sim, configs)
    caplog.set_level(logging.WARNING)
    await ActivityEnvironment().run(tools.poll_fleet, PollRequest(agent_id=AGENT))

    status = await ActivityEnvironment().run(
        tools.get_fleet_status, spend_req("get_fleet_status", {})
    )
    head = status.content.splitlines()[0]
    assert "1 machine(s) whose vast.ai rows do not parse: still billed" in head, head
    assert "max_instance_dph" in head and '"state":"unreadable"' in status.content
    assert "its vast.ai row does not parse (" in status.content

    view = read_fleet_view(store, AGENT, datetime.fromtimestamp(sim.market.now(), UTC))
    (row,) = view.rows
    assert row.id == iid and row.flags == [Flag.UNREADABLE]
    text = fleet_text(view, datetime.fromtimestamp(sim.market.now(), UTC))
    assert "row unreadable" in text
    assert f"1 machine(s) whose vast.ai rows do not parse ({iid}): still billed" in text

    logged = [r.getMessage() for r in caplog.records]
    assert any(
        f"agent {AGENT}: instance {iid}" in m and "does not parse (num_gpus" in m for m in logged
    ), logged


async def test_a_machine_whose_row_does_not_parse_can_still_be_destroyed(
    tools: FleetActivities, sim: SimServer, store: Store, configs: StaticConfigs
) -> None:
    iid, _ = await _rent_one_and_break_its_row(tools, sim, configs)
    gone = await ActivityEnvironment().run(
        tools.destroy_instance, spend_req("destroy_instance", {"instance_id": iid, "reason": "r"})
    )
    assert gone.mutating and not gone.is_error, gone.content
    assert live_instances(sim) == []
    (line,) = SpendLedger(store).instances(AGENT)
    assert line.closed_by == "destroyed"


# ------------------------------------------------------------ no usable id


def _account(label: str) -> tuple[set[int], Any]:
    """Machine 301, its duplicate 303 (a create that landed twice) and a row
    of the same label without a usable id (vast.ai's answer as a stub serves
    it: the simulator always gives ids); a DELETE destroys what has an id."""
    live = {301, 303}

    def answer(req: StubRequest) -> tuple[int, Any]:
        if req.method == "DELETE":
            live.discard(int(req.path.rstrip("/").rsplit("/", 1)[1]))
            return 200, {"success": True}
        if req.path == "/api/v1/instances/":
            rows = [instance_row(i, label) for i in sorted(live)]
            rows.append({**instance_row(302, label), "id": "x302", "num_gpus": "two"})
            return 200, instances_page(rows)
        return 404, "Not Found"

    return live, answer


async def test_a_row_without_a_usable_id_is_counted_never_acted_on(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = "a"  # the stub's rows carry agent "a"'s label (tests/helpers/vast_rows.py)
    live, answer = _account(create_label(agent, 1, "t1"))
    env = ActivityEnvironment()
    async with stub_tools(store, answer) as (tools, stub):
        snap = await env.run(tools.poll_fleet, PollRequest(agent_id=agent))
        ghost = next(i for i in snap.instances if i.unreadable)
        assert [i.id for i in snap.instances] == [ghost.id, 301, 303] and ghost.id < 0
        assert "no usable id" in ghost.note and "vast.ai's console" in ghost.note
        # The duplicate goes; the first machine rented stays, whatever the
        # row without an id says (its derived id is no machine's, nor the oldest).
        label = create_label(agent, 1, "t1")
        assert snap.duplicate_labels == {label: [301, 303]}
        report = await env.run(tools.reconcile_labels, ReconcileRequest(agent_id=agent))
        assert report.destroyed == [303] and report.remaining == [] and live == {301}
        deletes = [r for r in stub.requests if r.method == "DELETE"]
        assert [r.path for r in deletes] == ["/api/v0/instances/303/"]
        refused = await env.run(
            tools.destroy_instance,
            tool_request(agent, "destroy_instance", {"instance_id": ghost.id, "reason": "r"}),
        )
        assert refused.is_error and "without a usable id" in refused.content
        assert [r for r in stub.requests if r.method == "DELETE"] == deletes, "none sent"
        # The freeze's stop destroys 301 and does not wait for the row it cannot.
        monkeypatch.setattr(fleet_stop, "CHECK_EVERY_S", 0.05)
        monkeypatch.setattr(fleet_stop, "GIVE_UP_AFTER_S", 2.0)
        stopped = await env.run(
            tools.stop_fleet, StopFleetRequest(agent_id=agent, destroy_all=True)
        )
    assert stopped.destroyed == [301] and live == set()


def test_an_id_derived_from_a_label_is_stable_and_never_a_real_one() -> None:
    row = {"id": None, "label": "fleet-agent/a/r1-0123456789", "num_gpus": "two"}
    one = Instance.unreadable_row(row, "num_gpus: not an integer")
    two = Instance.unreadable_row(dict(row), "num_gpus: not an integer")
    assert one is not None and two is not None and one.id == two.id < 0
    assert not one.has_id and one.state == "unreadable" and one.price is None
    assert Instance.unreadable_row({"id": 5, "num_gpus": "two"}, "x") is None, "no label"
