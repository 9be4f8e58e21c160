"""vast.ai answers served over HTTP by a local stub (testkit/fakes/vast_stub.py),
for the tests of fleet tools against rows the simulator does not give: the
agent whose machines the rows label, the stub's clock and GPU catalogue, fleet
tools on a stub (`stub_tools`), a market of offers (`market`) searched as the
service searches it (`bundles`), and an instance row (`instance_row`)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from activities.fleet import FleetActivities
from fleet_agent.fleet.prover import ProverSpec
from fleet_agent.store import Store
from fleet_agent.vast.client import VastClient
from fleet_agent.vast.pacing import NO_PACING
from simulator.query import matches, sort_records
from testkit.fakes.configs import StaticConfigs
from testkit.fakes.vast_stub import StubRequest, VastStub

AGENT = "a"
NOW = 1_750_000_000.0
CATALOGUE = ["A100 PCIE", "A100 SXM4", "GTX 1080", "RTX 3060", "RTX 3090", "RTX 4090"]
_CONTROL = frozenset({"order", "type", "limit", "allocated_storage"})


@asynccontextmanager
async def stub_tools(
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


def market(n_unwanted: int, n_wanted: int) -> list[dict[str, Any]]:
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


def bundles(rows: list[dict[str, Any]], req: StubRequest) -> tuple[int, Any]:
    """The search as the service runs it: filters, order, limit."""
    query = req.body
    filters = {k: v for k, v in query.items() if k not in _CONTROL}
    found = [r for r in rows if matches(r, filters)]
    order = [(f, d == "desc") for f, d in query.get("order", [])] + [("id", False)]
    return 200, {"offers": sort_records(found, order)[: int(query.get("limit", 64))]}


def instance_row(iid: int, label: str, **fields: Any) -> dict[str, Any]:
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
