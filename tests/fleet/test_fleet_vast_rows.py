"""Fleet tools against answers the simulator's market does not give, served
over HTTP by a local stub: a market where the cheapest offers are all
unwanted, machines stopped, frozen or destroyed, another agent whose ID
extends ours, and a machine that vanishes between a look-up and a destroy."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.fleet.labels import create_label
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.models import AgentConfig, PollRequest
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator.query import matches, sort_records
from testkit.fakes.configs import StaticConfigs
from testkit.fakes.vast_stub import StubRequest, VastStub, instances_page
from tests.helpers import tool_request

AGENT = "a"
NOW = 1_750_000_000.0
CATALOGUE = ["A100 PCIE", "A100 SXM4", "GTX 1080", "RTX 3060", "RTX 3090", "RTX 4090"]
_CONTROL = frozenset({"order", "type", "limit", "allocated_storage"})


_req = partial(tool_request, AGENT)


@asynccontextmanager
async def _tools(
    store: Store, answer: Callable[[StubRequest], tuple[int, Any]]
) -> AsyncIterator[tuple[FleetActivities, VastStub]]:
    with VastStub(answer) as stub:
        async with VastClient("k", stub.url, pacing=NO_PACING) as vast:
            yield (
                FleetActivities(
                    vast,
                    ProverSpec(mode="curio_on_host"),
                    store=store,
                    configs=StaticConfigs(),
                    clock=lambda: NOW,
                ),
                stub,
            )


# ------------------------------------------------------------- the search


def _market(n_unwanted: int, n_wanted: int) -> list[dict[str, Any]]:
    """Offers as the service lists them: thousands of cheap machines we would
    refuse (small GPUs, small hosts, unverified, slow), a few good ones that
    cost more per hour."""
    rng = random.Random(3)
    rows = []
    for i in range(n_unwanted + n_wanted):
        wanted = i >= n_unwanted
        bad = rng.choice(["gpu", "ram", "verified", "inet", "cuda", "ports"])
        rows.append(
            {
                "id": 9_000_000 + i,
                "gpu_name": rng.choice(["A100 SXM4", "RTX 4090"])
                if wanted or bad != "gpu"
                else rng.choice(["RTX 3060", "GTX 1080"]),
                "num_gpus": 1,
                "gpu_ram": 24564,
                "cpu_ram": 250_000 if wanted or bad != "ram" else 31_000,
                "dph_total": round(rng.uniform(0.6, 1.0) if wanted else rng.uniform(0.05, 0.3), 4),
                "reliability": 0.99,
                "reliability2": 0.99,
                "rentable": True,
                "rented": False,
                "external": False,
                "verified": wanted or bad != "verified",
                "inet_down": 900.0 if wanted or bad != "inet" else 40.0,
                "cuda_max_good": 12.4 if wanted or bad != "cuda" else 11.2,
                "disk_space": 500.0,
                "direct_port_count": 10 if wanted or bad != "ports" else 0,
                "geolocation": "Texas, US",
                "gpu_frac": 1.0,
                "duration": 30 * 86400.0,
                # $/GB, as every offer row lists it (the simulator's: simulator/catalogue.py).
                "inet_down_cost": 0.002,
                "inet_up_cost": 0.001,
            }
        )
    return rows


def _bundles(rows: list[dict[str, Any]], req: StubRequest) -> tuple[int, Any]:
    """The search as the service runs it: filters, order, limit."""
    query = req.body
    filters = {k: v for k, v in query.items() if k not in _CONTROL}
    found = [r for r in rows if matches(r, filters)]
    order = [(f, d == "desc") for f, d in query.get("order", [])] + [("id", False)]
    return 200, {"offers": sort_records(found, order)[: int(query.get("limit", 64))]}


async def test_search_finds_the_allowed_offers_under_thousands_of_cheaper_unwanted_ones(
    store: Store,
) -> None:
    rows = _market(3000, 12)

    def answer(req: StubRequest) -> tuple[int, Any]:
        if req.path == "/api/v0/gpu_names/unique/":
            return 200, {"gpu_names": CATALOGUE}
        if req.path == "/api/v0/bundles/":
            return _bundles(rows, req)
        return 404, {"msg": "no"}

    async with _tools(store, answer) as (tools, stub):
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
    rows = _market(0, 40)
    monkeypatch.setattr("activities.fleet_search.PAGE_SIZE", 15)

    def answer(req: StubRequest) -> tuple[int, Any]:
        if req.path == "/api/v0/gpu_names/unique/":
            return 200, {"gpu_names": CATALOGUE}
        return _bundles(rows, req)

    async with _tools(store, answer) as (tools, stub):
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


def _row(iid: int, label: str, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": iid,
        "label": label,
        "actual_status": "running",
        "intended_status": "running",
        "cur_state": "running",
        "next_state": "running",
        "gpu_name": "RTX 4090",
        "num_gpus": 1,
        "cpu_ram": 128_000,
        "dph_total": 0.42,
        "start_date": NOW - 7200,
        "status_msg": "success, running img/args",
    }
    row.update(fields)
    return row


MINE = create_label(AGENT, 1, "t1")
ROWS = [
    _row(101, MINE),
    _row(102, create_label(AGENT, 1, "t2"), actual_status="stopped", cur_state="stopped"),
    _row(103, create_label(AGENT, 2, "t3"), actual_status="frozen", intended_status="frozen"),
    _row(104, create_label(AGENT, 2, "t4"), actual_status="exited", cur_state="unloaded"),
    _row(105, create_label(f"{AGENT}/b", 1, "t5")),
    _row(106, "someone-else"),
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
    async with _tools(store, _account) as (tools, _):
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
    async with _tools(store, _account) as (tools, stub):
        result = await ActivityEnvironment().run(
            tools.destroy_instance, _req("destroy_instance", {"instance_id": 105, "reason": "r"})
        )
    assert result.is_error and "not this agent's" in result.content
    assert not [r for r in stub.requests if r.method == "DELETE"]


async def test_a_machine_gone_before_its_destroy_counts_as_destroyed(store: Store) -> None:
    async with _tools(store, _account) as (tools, stub):
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
        _row(201, label),
        *(_row(202 + n, label, cur_state="unloaded") for n in range(count)),
    ]

    def answer(req: StubRequest) -> tuple[int, Any]:
        if req.path == "/api/v1/instances/":
            return 200, instances_page(rows)
        return 500, "unexpected"

    async with _tools(store, answer) as (tools, stub):
        snap = await ActivityEnvironment().run(tools.poll_fleet, PollRequest(agent_id=AGENT))
    assert snap.duplicate_labels == {} and [i.id for i in snap.instances] == [201]
    assert all(r.method == "GET" for r in stub.requests)
