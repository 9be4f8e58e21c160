"""The router's measured capacity against the simulator's truth.

Starts a `SimServer` in this process (ideal scenario, rate limits off),
rents --machines machines in router mode (their creates carry what the
router path's carry: fleet_agent/cuzk/credentials.py ``machine_env`` plus
``-p 9821:9821``), waits until each one's cuzk serves behind its TLS front,
then runs the router core (router/) in front of them over
``machine_channel`` with its client credential, and Curio-like callers that
keep it saturated for --seconds real seconds at the simulator's --speed.
For each machine it prints the router's witness (proofs done, proofs per
busy hour, per real hour) beside the truth (``GET /_sim/cuzk``:
``capacity_per_hour`` per sim hour, times the speed; its proofs done), and
the relative error of the measured rate (target: within 5 %). Writes JSON to
bench/results/ (or --json).

    .venv/bin/python -m bench.perf.sim_cuzk_router [--machines 4] [--seconds 60] [--speed 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc.aio

from bench._common import print_table, write_json
from fleet_agent.cuzk.channels import machine_channel
from fleet_agent.cuzk.credentials import Authority, ClientCredential, machine_env
from fleet_agent.cuzk.service import ProvingEngineStub, channel_options, pb
from fleet_agent.cuzk.witness import MemberSpec
from router.config import RouterConfig
from router.engine import Router
from router.members import ChannelClient
from router.server import start_server
from simulator import SimServer, snark
from simulator.curio import sample_porep

#: Hosts the router image starts on: 128 GiB of rented RAM or more, a driver
#: for any GPU, ports for the front (testkit/sim_helpers.py's prover host).
_HOSTS: dict[str, Any] = {
    "rentable": {"eq": True},
    "rented": {"eq": False},
    "verified": {"eq": True},
    "external": {"eq": False},
    "gpu_frac": {"eq": 1.0},
    "cpu_ram": {"gte": 131_072},
    "gpu_ram": {"gte": 11_000},
    "compute_cap": {"gte": 700},
    "cuda_max_good": {"gte": 12.8},
    "disk_space": {"gte": 100},
    "direct_port_count": {"gte": 3},
    "order": [["dph_total", "asc"]],
    "limit": 1000,
}


def _rent(sim: SimServer, authority: Authority, count: int) -> list[tuple[int, str]]:
    """(instance id, label) of `count` router-mode machines on distinct offers."""
    offers = sim.market.search_offers(_HOSTS)
    if len(offers) < count:
        raise SystemExit(
            f"only {len(offers)} offers fit; ask for fewer --machines or more --offers"
        )
    rented = []
    for n, offer in enumerate(offers[:count]):
        label = f"fleet-agent/bench/r{n}"
        env = {
            **machine_env(authority.machine_credential(label), authority.ca_pem),
            "-p 9821:9821": "1",
        }
        body = {"image": "prover", "disk": 80, "runtype": "args", "label": label, "env": env}
        rented.append((sim.market.rent(int(offer["id"]), body).instance_id, label))
    return rented


def _truth(sim: SimServer) -> dict[int, dict[str, Any]]:
    return {int(m["id"]): m for m in sim.market.cuzk_report()["machines"]}


def _boot(sim: SimServer, ids: list[int]) -> float:
    """Advance the clock until every machine's cuzk serves; sim seconds."""
    waited = 0.0
    while not all(_truth(sim)[i]["serving"] for i in ids):
        if waited > 12 * 3600:
            raise SystemExit("machines not serving after 12 sim hours")
        sim.market.advance(120)
        waited += 120
    return waited


async def _caller(
    stub: ProvingEngineStub, counter: list[int], until: float, bad: list[int]
) -> None:
    """One Curio task slot: prove, verify, again, until `until`."""
    while time.monotonic() < until:
        counter[0] += 1
        req = sample_porep(counter[0], size=4096)
        with contextlib.suppress(grpc.aio.AioRpcError):
            answer = await stub.Prove(pb.ProveRequest(submit=req), timeout=120)
            if not snark.verify(req, answer.result.proof):
                bad[0] += 1


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        authority = Authority.load_or_create(Path(tmp) / "router-ca")
        client = authority.router_client()
        with SimServer(
            seed=args.seed, speed=0, scenario="ideal", offers=args.offers, rate_limits=False
        ) as sim:
            rented = _rent(sim, authority, args.machines)
            ids = [i for i, _ in rented]
            booted = _boot(sim, ids)
            return await _measure(sim, rented, client, args, booted)


async def _measure(
    sim: SimServer,
    rented: list[tuple[int, str]],
    client: ClientCredential,
    args: argparse.Namespace,
    booted: float,
) -> dict[str, Any]:
    truth = _truth(sim)
    members = [
        MemberSpec(instance_id=i, label=label, address=f"127.0.0.1:{truth[i]['host_port']}")
        for i, label in rented
    ]

    def connect(spec: MemberSpec) -> ChannelClient:
        return ChannelClient(machine_channel(spec.address, spec.label, client))

    # Expected times in real seconds at this speed (attempt timeouts follow them).
    slowest = max(t["seconds_per_proof"]["porep-c2"] for t in truth.values())
    config = RouterConfig(
        expected_seconds={"porep-c2": slowest / args.speed},
        poll_s=0.5,
        status_timeout_s=2.0,
    )
    router = Router(config, connect, time.time)
    await router.start()
    server, port = await start_server("127.0.0.1:0", router)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options())
    try:
        sim.market.set_speed(args.speed)
        router.set_members(members)
        deadline = time.monotonic() + 60
        while {w.instance_id for w in router.witness() if w.phase == "serving"} != set(truth):
            if time.monotonic() > deadline:
                raise SystemExit(f"members not serving: {router.witness()}")
            await asyncio.sleep(0.2)
        gpus = sum(int(t["gpus"]) for t in truth.values())
        stub = ProvingEngineStub(channel)
        counter, bad = [0], [0]
        until = time.monotonic() + args.seconds
        await asyncio.gather(*(_caller(stub, counter, until, bad) for _ in range(3 * gpus + 2)))
        witness = {w.instance_id: w for w in router.witness()}
        truth = _truth(sim)
    finally:
        sim.market.set_speed(0)
        await channel.close(None)
        await server.stop(None)
        await router.close()
    rows = []
    for i, _ in rented:
        w, t = witness[i], truth[i]
        true_real = t["capacity_per_hour"] * args.speed
        measured = w.proofs_per_busy_hour
        error = (measured - true_real) / true_real if measured is not None else None
        rows.append(
            {
                "instance": i,
                "gpus": t["gpus"],
                "true_per_real_hour": round(true_real, 1),
                "router_per_busy_hour": round(measured, 1) if measured is not None else None,
                "error": round(error, 4) if error is not None else None,
                "router_done": w.done,
                "truth_done": t["proofs_completed"],
            }
        )
    return {
        "machines": args.machines,
        "speed": args.speed,
        "seconds": args.seconds,
        "boot_sim_seconds": booted,
        "bad_proofs_seen": bad[0],
        "rows": rows,
        "max_abs_error": max(
            (abs(r["error"]) for r in rows if r["error"] is not None), default=None
        ),
    }


def main() -> None:
    """Run, print the table, write the JSON."""
    p = argparse.ArgumentParser(prog="python -m bench.perf.sim_cuzk_router", description=__doc__)
    p.add_argument("--machines", type=int, default=4)
    p.add_argument("--seconds", type=float, default=60.0, help="real seconds of load")
    p.add_argument("--speed", type=float, default=200.0, help="sim seconds per real second")
    p.add_argument("--offers", type=int, default=2000)
    p.add_argument("--seed", type=int, default=52)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    result = asyncio.run(_run(args))
    for row in result["rows"]:
        print_table(f"machine {row['instance']}", {k: v for k, v in row.items() if k != "instance"})
    print_table(
        "router vs truth",
        {
            "max |error| of the measured rate": result["max_abs_error"],
            "target": 0.05,
            "bad proofs seen by callers": result["bad_proofs_seen"],
        },
    )
    print(f"\nwrote {write_json('sim_cuzk_router', result, args.json)}")


if __name__ == "__main__":
    main()
