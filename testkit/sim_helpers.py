"""Helpers for the simulator's own tests: HTTP calls as a client makes them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import httpx

from simulator import SimServer

#: The RAM floor (GiB, of the rental) of the fleet's tests and benchmarks on
#: the simulator: what its prover needs (one proof per 60 GiB, the capacity
#: model's baseline engine: simulator/prover.py), not cuzk's 128 GiB for the
#: machine (`ProverSpec`'s default), over which the simulated market lists
#: only a few hosts at the default caps. The worker's setting is
#: ``FLEET_PROVER_MIN_RAM_GIB``.
SIM_RAM_GIB = 60.0


@contextmanager
def steady_sim(
    seed: int, start: datetime | None = None, *, speed: float = 0
) -> Iterator[SimServer]:
    """The ideal market (no host faults), 2,000 offers that stay listed while
    the clock runs (no churn), no rate limits: a fleet's money and rules
    under test, not the market's moods. `start`: the simulated clock's
    (default: now); `speed` 0: it moves only when told."""
    with SimServer(
        seed=seed,
        speed=speed,
        scenario="ideal",
        offers=2000,
        rate_limits=False,
        start_epoch=start.timestamp() if start is not None else None,
    ) as server:
        server.market.set_faults(offer_churn=False)
        yield server


#: A host the prover can run on, with open ports for its status endpoint.
PROVER_HOST: dict[str, Any] = {
    "rentable": {"eq": True},
    "rented": {"eq": False},
    "verified": {"eq": True},
    "external": {"eq": False},
    # A whole host (a slice gets its `gpu_frac` of the host's RAM) with RAM
    # for the parameters, and a driver new enough for any GPU (12.8: Blackwell).
    "gpu_frac": {"eq": 1.0},
    "cpu_ram": {"gte": 61_440},
    "gpu_ram": {"gte": 11_000},
    "compute_cap": {"gte": 700},
    "cuda_max_good": {"gte": 12.8},
    "disk_space": {"gte": 100},
    "direct_port_count": {"gte": 2},
}
#: The create the fleet sends: the image's ENTRYPOINT, the status port mapped.
PROVER_CREATE: dict[str, Any] = {
    "image": "ghcr.io/fleet-agent/snark-prover:latest",
    "disk": 80,
    "runtype": "args",
    "env": {"-p 9100:9100": "1", "PROVER_STATUS_PORT": "9100"},
}


def api(sim: SimServer) -> httpx.Client:
    """A client with the simulator's key."""
    return httpx.Client(
        base_url=sim.url, headers={"Authorization": f"Bearer {sim.api_key}"}, timeout=10
    )


def find_offer(sim: SimServer, **filters: Any) -> dict[str, Any]:
    """The cheapest offer matching PROVER_HOST and `filters`."""
    with api(sim) as c:
        body = {**PROVER_HOST, **filters, "order": [["dph_total", "asc"]], "limit": 1}
        resp = c.post("/api/v0/bundles/", json=body)
    resp.raise_for_status()
    offers = resp.json()["offers"]
    assert offers, f"no offer matches {filters}"
    return dict(offers[0])


def rent(sim: SimServer, offer_id: int, **body: Any) -> int:
    """Rent `offer_id` as the fleet does (overrides in `body`); the instance id."""
    with api(sim) as c:
        resp = c.put(f"/api/v0/asks/{offer_id}/", json={**PROVER_CREATE, **body})
    assert resp.status_code == 200, resp.text
    return int(resp.json()["new_contract"])


def row(sim: SimServer, instance_id: int) -> dict[str, Any]:
    """The instance as ``GET /api/v0/instances/{id}/`` shows it."""
    with api(sim) as c:
        resp = c.get(f"/api/v0/instances/{instance_id}/")
    resp.raise_for_status()
    found = resp.json()["instances"]
    assert found is not None, f"instance {instance_id} is gone"
    return dict(found)


def prover_url(shown: dict[str, Any], port: int = 9100) -> str:
    """Where the instance's prover status is, from its row's port mapping."""
    mapped = shown["ports"][f"{port}/tcp"][0]["HostPort"]
    # Stripped, as the vastai CLI strips a row's strings (some come padded).
    return f"http://{str(shown['public_ipaddr']).strip()}:{mapped}/status"


def prover_status(sim: SimServer, instance_id: int, *, timeout: float = 5) -> dict[str, Any]:
    """The prover's status, read as a monitor would: row, mapped port, GET."""
    resp = httpx.get(prover_url(row(sim, instance_id)), timeout=timeout)
    resp.raise_for_status()
    return dict(resp.json())


def truth(sim: SimServer, instance_id: int) -> dict[str, Any]:
    """What the control API says really happens on the instance."""
    (found,) = (i for i in sim.market.state()["instances"] if i["id"] == instance_id)
    return dict(found)


def advance_until(
    sim: SimServer, done: Callable[[], bool], *, step: float = 60, limit: float = 6 * 3600
) -> float:
    """Advance the market in `step`s until `done()`; the sim seconds it took."""
    waited = 0.0
    while not done():
        assert waited < limit, f"not done after {limit} sim seconds"
        sim.market.advance(step)
        waited += step
    return waited
