"""The simulator's HTTP throughput: requests per second through httpx.

Starts a `SimServer` in this process (speed 0, ideal scenario, rate limits
off, 10,000 offers unless --offers) with a few rented machines, then times
--requests GETs of the current user (``/api/v0/users/current/``: next to no
work, so mostly the HTTP stack) and of the instance list
(``/api/v1/instances/``), and --searches offer searches (``POST
/api/v0/bundles/``, limit 64, dominated by the market's work), first from one keep-alive
client, then from --threads clients at once. See bench/README.md.

    .venv/bin/python -m bench.perf.sim_http [--requests 2000] [--threads 8]
"""

from __future__ import annotations

import argparse
import threading
import time
from collections.abc import Callable

import httpx

from simulator import DEFAULT_API_KEY, SimServer

_SEARCH = {
    "rentable": {"eq": True},
    "num_gpus": {"eq": 1},
    "limit": 64,
    "order": [["dph_total", "asc"]],
}


def _timed(url: str, requests: int, threads: int, call: Callable[[httpx.Client], None]) -> float:
    """Requests per second for `requests` calls spread over `threads` clients."""
    per_thread = requests // threads

    def work() -> None:
        headers = {"Authorization": f"Bearer {DEFAULT_API_KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            for _ in range(per_thread):
                call(client)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return per_thread * threads / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--searches", type=int, default=200, help="searches (each ~0.1 s)")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--offers", type=int, default=10_000)
    args = parser.parse_args()

    def user(client: httpx.Client) -> None:
        client.get("/api/v0/users/current/").raise_for_status()

    def listing(client: httpx.Client) -> None:
        client.get("/api/v1/instances/").raise_for_status()

    def search(client: httpx.Client) -> None:
        client.post("/api/v0/bundles/", json=_SEARCH).raise_for_status()

    with SimServer(seed=1, speed=0, scenario="ideal", offers=args.offers, rate_limits=False) as sim:
        for offer_id in sim.market.offer_ids()[:5]:
            sim.market.rent(offer_id, {"image": "bench", "disk": 10})
        runs = (
            ("GET /api/v0/users/current/", user, args.requests),
            ("GET /api/v1/instances/", listing, args.requests),
            ("POST /api/v0/bundles/", search, args.searches),
        )
        for name, call, count in runs:
            for threads in (1, args.threads):
                rate = _timed(sim.url, count, threads, call)
                print(f"{name:27} {threads:2} client(s): {rate:7.0f} requests/s", flush=True)


if __name__ == "__main__":
    main()
