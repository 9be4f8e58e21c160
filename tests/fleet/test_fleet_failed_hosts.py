"""Hosts that failed are not rented again: the fleet tools against the simulator
over HTTP (real client), with the memory in the store.

What the simulator received is recorded by wrapping its market's search, so
the tests see the ``notin`` filters the service gets; a market that ignores
them shows that the tool drops those offers itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import ToolResult
from fleet_agent.store import FailedHosts, Store
from simulator import SimServer
from tests.helpers import tool_request

AGENT = "hosts-test"
DAY = timedelta(hours=24)
_Search = Callable[[dict[str, Any]], list[dict[str, Any]]]


_req = partial(tool_request, AGENT)


async def _search(tools: FleetActivities) -> tuple[str, list[int]]:
    """The tool's first line and the offer ids it shows."""
    result: ToolResult = await ActivityEnvironment().run(
        tools.search_offers, _req("search_offers", {"limit": 50})
    )
    assert not result.is_error, result.content
    head, _, rows = result.content.partition("\n")
    return head, [int(r["offer_id"]) for r in json.loads(rows or "[]")]


async def _create(tools: FleetActivities, offer_id: int) -> ToolResult:
    return await ActivityEnvironment().run(
        tools.create_instance, _req("create_instance", {"offer_id": offer_id, "reason": "test"})
    )


def _offer(sim: SimServer, offer_id: int) -> dict[str, Any]:
    [row] = sim.market.search_offers({"id": {"eq": offer_id}})
    return row


def _now(sim: SimServer) -> datetime:
    return datetime.fromtimestamp(sim.market.now(), UTC)


def _remember(
    store: Store, sim: SimServer, machine: int, host: int | None, *, until: timedelta = DAY
) -> None:
    now = _now(sim)
    FailedHosts(store).remember(
        AGENT, machine_id=machine, host_id=host, reason="exited", at=now, until=now + until
    )


@pytest.fixture
def seen(sim: SimServer, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every search body the simulator receives (the market answers as usual)."""
    queries: list[dict[str, Any]] = []
    search: _Search = sim.market.search_offers

    def recording(query: dict[str, Any]) -> list[dict[str, Any]]:
        queries.append(query)
        return search(query)

    monkeypatch.setattr(sim.market, "search_offers", recording)
    return queries


def _ignore_exclusions(sim: SimServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The market drops the machine_id / host_id filters, as a service that
    ignores a filter would."""
    search: _Search = sim.market.search_offers

    def ignoring(query: dict[str, Any]) -> list[dict[str, Any]]:
        return search({k: v for k, v in query.items() if k not in ("machine_id", "host_id")})

    monkeypatch.setattr(sim.market, "search_offers", ignoring)


async def test_a_failed_machine_is_left_out_of_the_search_on_the_server_and_here(
    tools: FleetActivities,
    sim: SimServer,
    store: Store,
    seen: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    head, shown = await _search(tools)
    assert "left out" not in head
    best = _offer(sim, shown[0])
    _remember(store, sim, best["machine_id"], best["host_id"])
    seen.clear()

    head, after = await _search(tools)
    assert best["id"] not in after and after, head
    assert head.endswith("; 1 failed host left out:")
    searches = [q for q in seen if "gpu_name" in q]  # not the id look-ups of _offer
    assert searches and all(q["machine_id"] == {"notin": [best["machine_id"]]} for q in searches)
    assert all("host_id" not in q for q in searches), "one failed machine leaves its host alone"

    _ignore_exclusions(sim, monkeypatch)
    _, despite = await _search(tools)
    assert best["id"] not in despite, "dropped here when the service ignores the filter"
    assert despite[: len(after)] == after


async def test_create_refuses_a_failed_machines_offer_and_rents_nothing(
    tools: FleetActivities, sim: SimServer, store: Store
) -> None:
    _, shown = await _search(tools)
    offer = _offer(sim, shown[0])
    _remember(store, sim, offer["machine_id"], offer["host_id"])

    result = await _create(tools, offer["id"])
    assert result.is_error and not result.mutating
    text = result.content
    assert f"machine {offer['machine_id']}" in text and "exited" in text
    until = (_now(sim) + DAY).strftime("%Y-%m-%d %H:%M UTC")
    assert f"until {until}" in text and "Nothing was rented" in text
    assert sim.market.state()["instances"] == []


async def test_an_expired_entry_leaves_nothing_out(
    tools: FleetActivities, sim: SimServer, store: Store, seen: list[dict[str, Any]]
) -> None:
    _, shown = await _search(tools)
    offer = _offer(sim, shown[0])
    now = _now(sim)
    FailedHosts(store).remember(
        AGENT,
        machine_id=offer["machine_id"],
        host_id=offer["host_id"],
        reason="exited",
        at=now - 2 * DAY,
        until=now - timedelta(seconds=1),
    )
    seen.clear()
    head, after = await _search(tools)
    assert offer["id"] in after and "left out" not in head
    assert all("machine_id" not in q for q in seen)

    result = await _create(tools, offer["id"])
    assert result.mutating and not result.is_error, result.content
    assert len(sim.market.state()["instances"]) == 1


async def test_two_failed_machines_of_a_host_leave_out_its_other_offers(
    tools: FleetActivities, sim: SimServer, store: Store, seen: list[dict[str, Any]]
) -> None:
    _, shown = await _search(tools)
    offer = _offer(sim, shown[0])
    host = offer["host_id"]
    # Machines of the same host that are not listed any more.
    first, second = offer["machine_id"] + 100_000, offer["machine_id"] + 200_000
    _remember(store, sim, first, host)
    _, once = await _search(tools)
    assert offer["id"] in once, "one failed machine leaves the host's others in"

    _remember(store, sim, second, host)
    seen.clear()
    head, twice = await _search(tools)
    assert offer["id"] not in twice and twice
    assert head.endswith(
        "; 2 failed hosts left out (and every machine of 1 host with repeated failures):"
    )
    searches = [q for q in seen if "gpu_name" in q]
    assert searches and all(q["host_id"] == {"notin": [host]} for q in searches)
    assert all(q["machine_id"] == {"notin": [first, second]} for q in searches)

    result = await _create(tools, offer["id"])
    assert result.is_error and f"host {host}" in result.content
    assert f"machine {first}" in result.content and f"machine {second}" in result.content
    assert sim.market.state()["instances"] == []
