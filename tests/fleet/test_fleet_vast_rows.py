"""Fleet tools against answers the simulator's market does not give, served
over HTTP by a local stub: a market where the cheapest offers are all
unwanted, machines stopped, frozen or destroyed, another agent whose ID
extends ours, and a machine that vanishes between a look-up and a destroy."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from fleet_agent.fleet.labels import create_label
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.models import AgentConfig, PollRequest
from fleet_agent.store import Store
from testkit.fakes.vast_stub import StubRequest, instances_page
from tests.helpers import tool_request
from tests.helpers.vast_rows import AGENT, CATALOGUE, bundles, instance_row, market, stub_tools

_req = partial(tool_request, AGENT)


# ------------------------------------------------------------- the search


async def test_search_finds_the_allowed_offers_under_thousands_of_cheaper_unwanted_ones(
    store: Store,
) -> None:
    rows = market(3000, 12)

    def answer(req: StubRequest) -> tuple[int, Any]:
        if req.path == "/api/v0/gpu_names/unique/":
            return 200, {"gpu_names": CATALOGUE}
        if req.path == "/api/v0/bundles/":
            return bundles(rows, req)
        return 404, {"msg": "no"}

    async with stub_tools(store, answer) as (tools, stub):
        result = await ActivityEnvironment().run(
            tools.search_offers, _req("search_offers", {"limit": 50})
        )
    assert not result.is_error, result.content
    found = json.loads(result.content.split("\n", 1)[1])
    assert sorted(r["offer_id"] for r in found) == [r["id"] for r in rows[3000:]]
    (search,) = [r for r in stub.requests if r.path == "/api/v0/bundles/"]
    body = search.body
    # The allowed families in the catalogue's names; those it lacks as written.
    assert body["gpu_name"] == {
        "in": ["A100 PCIE", "A100 SXM4", "H100", "RTX 3090", "RTX 4090", "RTX 5090"]
    }
    for key in ("verified", "rentable", "rented", "external", "cpu_ram", "num_gpus"):
        assert key in body, key
    for key in ("reliability", "dph_total", "inet_down", "cuda_max_good", "direct_port_count"):
        assert key in body, key
    assert body["allocated_storage"] == ProverSpec().disk_gb
    assert body["order"] == [["dph_total", "asc"]]


async def test_search_reads_further_pages_when_a_page_is_full(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = market(0, 40)
    monkeypatch.setattr("activities.fleet_search.PAGE_SIZE", 15)

    def answer(req: StubRequest) -> tuple[int, Any]:
        if req.path == "/api/v0/gpu_names/unique/":
            return 200, {"gpu_names": CATALOGUE}
        return bundles(rows, req)

    async with stub_tools(store, answer) as (tools, stub):
        result = await ActivityEnvironment().run(
            tools.search_offers, _req("search_offers", {"limit": 50})
        )
    found = json.loads(result.content.split("\n", 1)[1])
    searches = [r for r in stub.requests if r.path == "/api/v0/bundles/"]
    assert len(searches) == 3, "three pages of 15 for 40 offers"
    assert len(found) == 40 and "cheapest per proof first:" in result.content
    later = searches[1].body["dph_total"]
    assert later["gte"] > 0 and later["lte"] == AgentConfig().max_instance_dph


# ------------------------------------------------------------- the states


MINE = create_label(AGENT, 1, "t1")
ROWS = [
    instance_row(101, MINE),
    instance_row(102, create_label(AGENT, 1, "t2"), actual_status="stopped", cur_state="stopped"),
    instance_row(
        103, create_label(AGENT, 2, "t3"), actual_status="frozen", intended_status="frozen"
    ),
    instance_row(104, create_label(AGENT, 2, "t4"), actual_status="exited", cur_state="unloaded"),
    instance_row(105, create_label(f"{AGENT}/b", 1, "t5")),
    instance_row(106, "someone-else"),
]


def _account(req: StubRequest) -> tuple[int, Any]:
    if req.path == "/api/v1/instances/":
        return 200, instances_page(ROWS)
    if req.method == "GET" and req.path.startswith("/api/v0/instances/"):
        iid = int(req.path.rstrip("/").rsplit("/", 1)[1])
        return 200, {"instances": next((r for r in ROWS if r["id"] == iid), None)}
    if req.method == "DELETE":
        # Gone between the look-up and the destroy.
        return 404, {"success": False, "error": "not_found", "msg": "Instance not found"}
    return 404, "Not Found"


async def test_status_shows_stopped_and_frozen_machines_as_no_capacity(store: Store) -> None:
    async with stub_tools(store, _account) as (tools, _):
        result = await ActivityEnvironment().run(
            tools.get_fleet_status, _req("get_fleet_status", {})
        )
        snap = await ActivityEnvironment().run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    head, _, rows_text = result.content.partition("\n")
    rows_text, _, spend = rows_text.rpartition("\n")
    assert spend.startswith("Spend: today $")
    rows = json.loads(rows_text.removeprefix("```json\n").removesuffix("\n```"))
    assert [r["id"] for r in rows] == [101, 102, 103], "not a/b's, not destroyed, not others'"
    assert [r["state"] for r in rows] == ["running", "stopped", "frozen"]
    assert "2 machine(s) are not capacity" in head and "replace or release" in head
    assert all("note" in r for r in rows[1:]) and "note" not in rows[0]
    assert snap.states() == {101: "running", 102: "stopped", 103: "frozen"}
    # Before any poll the running machine counts with the capacity model's
    # estimate; the poll finds no prover status to read on this stub's rows,
    # so it is not capacity yet, only expected once its prover answers.
    assert rows[0]["proofs_per_hour"] > 0
    assert snap.capacity_proofs_per_hour == 0
    assert snap.expected_proofs_per_hour == rows[0]["expected_proofs_per_hour"]
    assert snap.instances[0].prover.startswith("unreachable: status port 9100 is not mapped")


async def test_an_agent_never_destroys_a_machine_of_an_agent_whose_id_extends_its_own(
    store: Store,
) -> None:
    async with stub_tools(store, _account) as (tools, stub):
        result = await ActivityEnvironment().run(
            tools.destroy_instance, _req("destroy_instance", {"instance_id": 105, "reason": "r"})
        )
    assert result.is_error and "not this agent's" in result.content
    assert not [r for r in stub.requests if r.method == "DELETE"]


async def test_a_machine_gone_before_its_destroy_counts_as_destroyed(store: Store) -> None:
    async with stub_tools(store, _account) as (tools, stub):
        result = await ActivityEnvironment().run(
            tools.destroy_instance, _req("destroy_instance", {"instance_id": 102, "reason": "r"})
        )
        gone = await ActivityEnvironment().run(
            tools.destroy_instance, _req("destroy_instance", {"instance_id": 104, "reason": "r"})
        )
    assert not result.is_error and result.mutating
    assert result.content.startswith("Destroyed instance 102")
    assert [r.path for r in stub.requests if r.method == "DELETE"] == ["/api/v0/instances/102/"]
    # A destroyed row the service still shows is not destroyed again.
    assert not gone.is_error and "does not exist" in gone.content


@pytest.mark.parametrize("count", [1, 2])
async def test_reconcile_leaves_destroyed_rows_alone(store: Store, count: int) -> None:
    label = create_label(AGENT, 9, "dup")
    rows = [
        instance_row(201, label),
        *(instance_row(202 + n, label, cur_state="unloaded") for n in range(count)),
    ]

    def answer(req: StubRequest) -> tuple[int, Any]:
        if req.path == "/api/v1/instances/":
            return 200, instances_page(rows)
        return 500, "unexpected"

    async with stub_tools(store, answer) as (tools, stub):
        snap = await ActivityEnvironment().run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    assert snap.duplicate_labels == {} and [i.id for i in snap.instances] == [201]
    assert all(r.method == "GET" for r in stub.requests)
