"""The router's memory per proof in flight: N inputs of M MB held at once.

    .venv/bin/python -m bench.perf.router_memory --jobs 10 --input-mb 50

Starts `--machines` cuzk stand-ins (``python -m simulator.cuzk``, one GPU,
`--proof-seconds` a PoRep, so every job stays on a machine while the others
arrive) and the router (``python -m router``, members file, plaintext), then
sends `--jobs` Prove calls of `--input-mb` each, all at once, from this
process (each request serialized once, sent with an identity serializer so
this process holds one copy). While they are in flight it samples the
router's RSS (/proc/<pid>/status VmRSS) every 50 ms; it prints the router's
RSS before, its peak (VmHWM) and the peak less the baseline per MB of inputs
in flight (1.0 = one copy of each input). Nothing of the router is imported:
the same script measures any version of it.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc.aio

from bench._common import print_table, write_json
from bench.perf._router_stack import Proc, peak_rss_bytes, start_proc, stop_all, write_members
from fleet_agent.cuzk.service import SERVICE, ProvingEngineStub, channel_options, pb
from simulator.curio import sample_porep

_MB = 1024 * 1024


def _rss(pid: int) -> int:
    """VmRSS of `pid`, bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError("no VmRSS")


def _input(n: int, size: int) -> bytes:
    """A PoRep C2 ProveRequest (curio lib/ffi/cuzk_funcs.go's fields) as wire bytes."""
    return pb.ProveRequest(submit=sample_porep(n, size)).SerializeToString()


async def _ready(address: str, gpus: int, within: float = 120.0) -> None:
    t_end = time.monotonic() + within
    async with grpc.aio.insecure_channel(address, options=channel_options()) as ch:
        stub = ProvingEngineStub(ch)
        while time.monotonic() < t_end:
            try:
                st = await stub.GetStatus(pb.GetStatusRequest(), timeout=5)
                if len(st.gpus) >= gpus and any(s.circuit_id == "porep-32g" for s in st.loaded_srs):
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.2)
    raise TimeoutError("router not serving")


async def run(a: argparse.Namespace) -> dict[str, Any]:
    """Start the stack, send the jobs, sample the router; the figures."""
    logs = Path(tempfile.mkdtemp(prefix="router-memory-"))
    procs: list[Proc] = []
    try:
        for i in range(a.machines):
            procs.append(
                await start_proc(
                    f"cuzk-{i}",
                    "simulator.cuzk",
                    ["--listen", "127.0.0.1:0", "--proof-seconds", f"porep-c2={a.proof_seconds}"],
                    logs,
                )
            )
        members = logs / "members.json"
        write_members(members, [p.address for p in procs])
        router = await start_proc(
            "router",
            "router",
            [
                "--listen",
                "127.0.0.1:0",
                "--members-file",
                str(members),
                "--insecure-members",
                "--poll-seconds",
                "0.5",
            ],
            logs,
        )
        procs.append(router)
        await _ready(router.address, a.machines)
        size = int(a.input_mb * _MB)
        inputs = [_input(n, size) for n in range(1, a.jobs + 1)]
        input_bytes = sum(len(b) for b in inputs)
        baseline = _rss(router.pid)
        samples: list[int] = []
        async with grpc.aio.insecure_channel(router.address, options=channel_options()) as ch:
            prove = ch.unary_unary(
                f"/{SERVICE}/Prove",
                request_serializer=None,
                response_deserializer=pb.ProveResponse.FromString,
            )
            t0 = time.monotonic()
            calls = [
                asyncio.ensure_future(prove(b, timeout=a.proof_seconds * 6 + 60)) for b in inputs
            ]
            del inputs
            while not all(c.done() for c in calls):
                samples.append(_rss(router.pid))
                await asyncio.sleep(0.05)
            results = await asyncio.gather(*calls, return_exceptions=True)
            elapsed = time.monotonic() - t0
        done = pb.AwaitProofResponse.COMPLETED
        ok = sum(1 for r in results if isinstance(r, pb.ProveResponse) and r.result.status == done)
        peak = max(peak_rss_bytes(router.pid), *samples)
        return {
            "jobs": a.jobs,
            "input_mb": a.input_mb,
            "machines": a.machines,
            "completed": ok,
            "seconds": round(elapsed, 1),
            "inputs_in_flight_mb": round(input_bytes / _MB, 1),
            "router_rss_before_mb": round(baseline / _MB, 1),
            "router_peak_rss_mb": round(peak / _MB, 1),
            "router_rss_end_mb": round(samples[-1] / _MB, 1) if samples else None,
            "peak_over_baseline_per_input": round((peak - baseline) / input_bytes, 2),
            "rss_mb_each_second": [round(x / _MB) for x in samples[::20]],
        }
    finally:
        await stop_all(procs)


def main() -> None:
    """Parse arguments, run, print the table and write the JSON."""
    p = argparse.ArgumentParser(
        prog="python -m bench.perf.router_memory", description=__doc__.splitlines()[0]
    )
    p.add_argument("--jobs", type=int, default=10)
    p.add_argument("--input-mb", type=float, default=50.0)
    p.add_argument("--machines", type=int, default=5, help="one GPU each: 2 jobs per machine")
    p.add_argument("--proof-seconds", type=float, default=20.0)
    p.add_argument("--json-out", type=Path, default=None)
    a = p.parse_args()
    figures = asyncio.run(run(a))
    print_table("router memory", figures)
    write_json("router_memory", figures, a.json_out)


if __name__ == "__main__":
    main()
