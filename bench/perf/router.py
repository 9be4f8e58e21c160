"""The cuzk router under a Curio node's load: its CPU and memory, the latency
it adds to each proof, proofs lost or proven twice; with ``--faults``, how it
treats a machine killed mid-proof, a liar, a bad prover and a trickler.

    .venv/bin/python -m bench.perf.router --machines 20 --rate 1000 --minutes 5 --speed 10
    .venv/bin/python -m bench.perf.router --machines 20 --minutes 2 --faults

It starts `--machines` cuzk stand-ins (``python -m simulator.cuzk``, one GPU
each, `--proof-seconds` a PoRep), the router (``python -m router`` with a
members file naming them) and, in this process, the Curio stand-in
(simulator/curio) pointed at the router: PoRep arrivals at `--rate`
proofs/hour for `--minutes` of real time, each with a `--input-mb` vanilla
proof and a `--deadline-minutes` deadline, MaxPending `--max-pending`.

Time runs at `--speed`: the stand-ins prove a 53 s proof in 53/speed s and
Curio's rate, ProveTimeout, RetryWait and deadlines scale with them, so at
speed 10 the router sees ten times the target's proofs a second. The router's
own times (expected proof time, attempt timeouts, dead after 60 s) are real
seconds unless it takes ``--speed`` (passed when its ``--help`` lists it). The
figures come raw (this run) and per proof, for extrapolation to the target.

What it measures, from outside the router: its CPU (user + system from
/proc/<pid>/stat over the arrivals and the drain) and peak RSS (VmHWM);
added latency (at Curio: a proof's time from arrival to verified, less the
stand-in's own proof time; and each successful Prove call's time less it);
lost proofs (never verified at Curio) and duplicates (a request id Curio got
a verified proof for twice); on-time %. With ``--faults`` the first four
machines are: killed (SIGKILL once it is proving, a third into the run), a
liar (GetStatus claims 64 idle GPUs), a bad prover (wrong proof bytes) and
a trickler (every answer waits, Prove never answers). A tap in front of each
(bench/perf/_router_stack.py) counts the proofs the router sends it (by the
bytes); the table says for each how long, in expected proof times, until the
router sent it no more.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc.aio

from bench._common import ROOT, percentile, print_table, write_json
from bench.perf._cpu import CpuWindow
from bench.perf._router_stack import Proc, Tap, peak_rss_bytes, start_proc, stop_all, write_members
from fleet_agent.cuzk.service import ProvingEngineStub, channel_options, pb
from simulator.curio import CurioConfig, CurioStandIn, JobRecord, arrival_times

#: The fault machines, in order, and the stand-in behaviour each plays
#: (simulator/cuzk/config.py `Mode`); the killed one is honest until killed.
FAULTS = {"killed": "honest", "liar": "lies", "bad": "bad", "trickler": "trickle"}
#: A bad machine counts as no longer sent work when nothing reached it for
#: this many expected proof times before the run (arrivals and drain) ended
#: (an honest one of a fleet with work gets one about every proof time).
STOPPED_AFTER_PROOFS = 3


def _router_flags(speed: float) -> list[str]:
    """``--speed`` for the router when it takes one (its times scale with the
    stand-ins'), and ``--insecure-members`` when it dials TLS by default (the
    stand-ins on loopback speak plaintext; router/__main__.py)."""
    done = subprocess.run(
        [sys.executable, "-m", "router", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"python -m router does not start:\n{done.stderr[-2000:]}")
    flags = ["--speed", str(speed)] if "--speed" in done.stdout else []
    return flags + (["--insecure-members"] if "--insecure-members" in done.stdout else [])


async def _wait_ready(address: str, gpus: int, within: float = 180.0) -> float:
    """Seconds until the router's GetStatus shows porep-32g loaded and `gpus` GPUs serving."""
    t0 = time.monotonic()
    async with grpc.aio.insecure_channel(address, options=channel_options()) as channel:
        stub = ProvingEngineStub(channel)
        while True:
            with contextlib.suppress(grpc.aio.AioRpcError):
                status = await stub.GetStatus(pb.GetStatusRequest(), timeout=5)
                loaded = {s.circuit_id for s in status.loaded_srs}
                if "porep-32g" in loaded and len(status.gpus) >= gpus:
                    return time.monotonic() - t0
            if time.monotonic() - t0 > within:
                raise TimeoutError(f"the router did not serve {gpus} GPUs in {within:.0f} s")
            await asyncio.sleep(0.25)


async def _kill_mid_proof(proc: Proc, after: float, give_up: float) -> bool:
    """After `after` s, SIGKILL `proc` as soon as its GetStatus shows a job on a
    GPU (True), or at `give_up` s whatever it does (False)."""
    await asyncio.sleep(after)
    t_end = time.monotonic() + max(0.0, give_up - after)
    async with grpc.aio.insecure_channel(proc.address) as channel:
        stub = ProvingEngineStub(channel)
        while time.monotonic() < t_end:
            with contextlib.suppress(grpc.aio.AioRpcError):
                status = await stub.GetStatus(pb.GetStatusRequest(), timeout=1)
                if any(g.current_job_id for g in status.gpus):
                    proc.kill()
                    return True
            await asyncio.sleep(0.02)
    proc.kill()
    return False


def _mem_available() -> int:
    """The machine's MemAvailable, bytes (/proc/meminfo)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


async def _sample(procs: list[Proc], min_free: float, run: asyncio.Task[bool]) -> str:
    """Read the processes' CPU and peak RSS each second; cancel `run` when the
    machine's available memory falls under `min_free` bytes (every 50 MB input
    is held several times over: by Curio, the router, a stand-in). Returns why
    it stopped the run, or "" when the run ended by itself."""
    while not run.done():
        for p in procs:
            p.sample()
        free = _mem_available()
        if free < min_free:
            run.cancel()
            return f"aborted: {free / 1e9:.1f} GB of memory left (--min-free-gb)"
        await asyncio.sleep(1.0)
    return ""


async def _machine_proofs(procs: list[Proc]) -> int:
    """Proofs the live stand-ins say they completed (their GetMetrics counter;
    a liar's GetStatus totals are made up, its metrics are not)."""
    total = 0
    for p in procs:
        if p.proc.returncode is not None or p.killed_at is not None:
            continue
        with contextlib.suppress(grpc.aio.AioRpcError):
            async with grpc.aio.insecure_channel(p.address) as channel:
                text = (
                    await ProvingEngineStub(channel).GetMetrics(pb.GetMetricsRequest(), timeout=5)
                ).prometheus_text
            m = re.search(r"^cuzk_proofs_completed_total (\d+)$", text, re.M)
            total += int(m[1]) if m else 0
    return total


def _pct(values: list[float], proof_s: float) -> dict[str, float | None]:
    p50, p99 = percentile(values, 50), percentile(values, 99)
    return {
        "p50_s": p50,
        "p99_s": p99,
        "p50_pct_of_proof": None if p50 is None else 100 * p50 / proof_s,
        "p99_pct_of_proof": None if p99 is None else 100 * p99 / proof_s,
    }


def _latency(jobs: list[JobRecord], proof_s: float) -> dict[str, Any]:
    """Added latency: end to end (arrival to verified) and per successful
    Prove call, each less the stand-in's own proof time."""
    e2e = [j.done_at - j.submitted - proof_s for j in jobs if j.done_at is not None]
    ok = [a for j in jobs for a in j.attempts if a.outcome == "ok" and a.rpc_s is not None]
    rpc = [a.rpc_s - proof_s for a in ok if a.rpc_s is not None]
    beyond_cuzk = [
        a.rpc_s - a.cuzk_total_ms / 1000 for a in ok if a.rpc_s is not None and a.cuzk_total_ms
    ]
    return {
        "end_to_end": _pct(e2e, proof_s),
        "prove_call": _pct(rpc, proof_s),
        "prove_call_beyond_cuzk_total": _pct(beyond_cuzk, proof_s),
    }


def _fault_rows(
    taps: dict[str, Tap], killed: Proc | None, t0: float, end: float, proof_s: float
) -> dict[str, dict[str, Any]]:
    """Per bad machine: proofs sent, and when the router stopped sending (in
    seconds and expected proof times from when it went bad: the kill, or the
    first proof sent to a machine bad from the start)."""
    rows: dict[str, dict[str, Any]] = {}
    for role, tap in taps.items():
        sends = tap.sends
        bad_since = (killed.killed_at if role == "killed" and killed is not None else None) or (
            sends[0].at if sends else None
        )
        after = [s for s in sends if bad_since is not None and s.at >= bad_since]
        last = after[-1].at if after else bad_since
        stopped = last is not None and end - last >= STOPPED_AFTER_PROOFS * proof_s
        to_stop = None if last is None or bad_since is None else last - bad_since
        rows[role] = {
            "sends": len(sends),
            "sends_after_bad": len(after),
            "bad_since_s": None if bad_since is None else bad_since - t0,
            "stopped": stopped,
            "to_last_send_s": to_stop,
            "to_last_send_proofs": None if to_stop is None else to_stop / proof_s,
            "bytes_sent": tap.upstream_bytes,
            "quiet_after_last_send_proofs": None if last is None else (end - last) / proof_s,
            "send_times_s": [round(x.at - t0, 3) for x in sends],
        }
    return rows


def _cuzk_args(args: argparse.Namespace, role: str) -> list[str]:
    """A stand-in's command line (simulator/cuzk/__main__.py): one GPU, the
    PoRep time, the bench's speed, the role's behaviour."""
    return [
        "--listen", "127.0.0.1:0",
        "--speed", str(args.speed),
        "--proof-seconds", f"porep-c2={args.proof_seconds}",
        "--behaviour", FAULTS.get(role, "honest"),
    ]  # fmt: skip


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Bring the stack up, run the load, take it down; the figures."""
    logs = tempfile.mkdtemp(prefix="router-bench-")
    logdir = Path(logs)
    roles = ["honest"] * args.machines
    if args.faults:
        if args.machines < len(FAULTS) + 1:
            raise SystemExit(f"--faults needs at least {len(FAULTS) + 1} machines")
        roles[: len(FAULTS)] = list(FAULTS)
    proof_s = args.proof_seconds / args.speed
    router_flags = _router_flags(args.speed)
    procs: list[Proc] = []
    taps: dict[str, Tap] = {}
    try:
        cuzk = await asyncio.gather(
            *(
                start_proc(f"cuzk-{i + 1}", "simulator.cuzk", _cuzk_args(args, role), logdir)
                for i, role in enumerate(roles)
            )
        )
        procs += cuzk
        addresses = []
        for p, role in zip(cuzk, roles, strict=True):
            if role in FAULTS:
                taps[role] = Tap(p.address, int(args.input_mb * 1_000_000))
                addresses.append(await taps[role].start())
            else:
                addresses.append(p.address)
        members = logdir / "members.json"
        write_members(members, addresses)
        router = await start_proc(
            "router",
            "router",
            ["--listen", "127.0.0.1:0", "--members-file", str(members), *router_flags],
            logdir,
        )
        procs.append(router)
        honest = roles.count("honest")
        ready_s = await _wait_ready(router.address, honest)

        max_pending = args.max_pending or max(1, args.machines * 3 // 2)
        config = CurioConfig(
            cuzk=router.address,
            max_pending=max_pending,
            prove_timeout_s=args.prove_timeout,
            input_bytes=int(args.input_mb * 1_000_000),
            deadline_s=args.deadline_minutes * 60,
            speed=args.speed,
            seed=args.seed,
        )
        arrivals = arrival_times(args.minutes * args.speed, rate_per_hour=args.rate, seed=args.seed)
        drain = (
            args.drain_minutes if args.drain_minutes is not None else args.deadline_minutes
        ) * 60
        for p in procs:
            p.sample()
        router_cpu0 = router.cpu_s
        cuzk_cpu0 = sum(p.cpu_s for p in cuzk)
        window = CpuWindow({"router": [router.pid], "bench": [os.getpid()]})
        t0 = time.monotonic()
        killer = None
        async with CurioStandIn(config) as node:
            if args.faults:
                span = args.minutes * 60
                killer = asyncio.create_task(_kill_mid_proof(cuzk[0], span / 3, 2 * span / 3))
            load = asyncio.create_task(node.run(arrivals, drain_s=drain))
            sampler = asyncio.create_task(_sample(procs, args.min_free_gb * 1e9, load))
            with contextlib.suppress(asyncio.CancelledError):
                await load
            aborted = await sampler
            all_ended = not aborted and load.result()
            wall = time.monotonic() - t0
            cpu = window.stop()
            for p in procs:
                p.sample()
            router_peak = peak_rss_bytes(router.pid)
            bench_peak = peak_rss_bytes(os.getpid())
            summary = node.summary()
            jobs = list(node.jobs)
        if killer is not None and aborted:
            killer.cancel()
        killed_mid_proof = None
        if killer is not None:
            with contextlib.suppress(asyncio.CancelledError):
                killed_mid_proof = await killer
        machine_proofs = await _machine_proofs(cuzk)
    finally:
        await stop_all(procs)
        for tap in taps.values():
            await tap.stop()

    router_cpu = router.cpu_s - router_cpu0
    done = summary.done
    per_proof_cpu = router_cpu / done if done else None
    target_cores = None if per_proof_cpu is None else per_proof_cpu * args.rate / 3600
    out: dict[str, Any] = {
        "args": vars(args) | {"max_pending": max_pending, "router_flags": router_flags},
        "logs": logs,
        "aborted": aborted,
        "router_ready_s": ready_s,
        "wall_s": wall,
        "all_jobs_ended": all_ended,
        "proof_real_s": proof_s,
        "proofs_per_s_offered": args.rate * args.speed / 3600,
        # Above ~0.7 proofs wait at the router for a free machine, and that
        # wait is in the added latency: read the router's own cost at lower load.
        "fleet_utilization_offered": args.rate * args.proof_seconds / (3600 * honest),
        "router": {
            "cpu_s": router_cpu,
            "core_pct": 100 * router_cpu / wall,
            "peak_rss_mb": router_peak / 1e6,
            "cpu_ms_per_proof": None if per_proof_cpu is None else 1000 * per_proof_cpu,
            "core_pct_at_target_rate": None if target_cores is None else 100 * target_cores,
        },
        "harness": {
            "cuzk_cpu_s": sum(p.cpu_s for p in cuzk) - cuzk_cpu0,
            "cuzk_peak_rss_mb_max": max(p.peak_rss for p in cuzk) / 1e6,
            "cuzk_peak_rss_mb_sum": sum(p.peak_rss for p in cuzk) / 1e6,
            # The Curio stand-in, the taps and this script.
            "bench_peak_rss_mb": bench_peak / 1e6,
            "machine": cpu,
        },
        "latency_added": _latency(jobs, proof_s),
        "machine_proofs": machine_proofs,
        "curio": summary.model_dump(),
    }
    if args.faults:
        out["faults"] = {
            "killed_mid_proof": killed_mid_proof,
            "every_job_on_time": summary.done_on_time == summary.arrived,
            "not_on_time": summary.arrived - summary.done_on_time,
            "machines": _fault_rows(taps, cuzk[0], t0, t0 + wall, proof_s),
        }
    return out


def _table(r: dict[str, Any]) -> dict[str, Any]:
    c, rt, lat = r["curio"], r["router"], r["latency_added"]
    rows: dict[str, Any] = {
        "proofs offered / s (speed-scaled)": r["proofs_per_s_offered"],
        "fleet utilization offered (honest machines)": r["fleet_utilization_offered"],
        "wall s (arrivals + drain) / all jobs ended": f"{r['wall_s']:.1f} / {r['all_jobs_ended']}",
        "arrived / done / on time": f"{c['arrived']} / {c['done']} / {c['done_on_time']}",
        "on time %": c["on_time_pct"],
        "lost (never verified)": c["lost"],
        "duplicates (verified twice)": c["duplicates"],
        "machine proofs (live stand-ins)": r["machine_proofs"],
        "curio attempts / retries": f"{c['attempts']} / {c['retries']}",
        "curio failures": c["failures"] or "-",
        "router CPU s (window)": rt["cpu_s"],
        "router % of a core": rt["core_pct"],
        "router CPU ms / proof": rt["cpu_ms_per_proof"],
        f"router % of a core at {r['args']['rate']:g} proofs/h": rt["core_pct_at_target_rate"],
        "router peak RSS MB": rt["peak_rss_mb"],
        "proof time (real s)": r["proof_real_s"],
    }
    for name, key in (("end to end", "end_to_end"), ("Prove call", "prove_call")):
        v = lat[key]
        rows[f"added, {name}: p50 s (% of proof)"] = _s_pct(v["p50_s"], v["p50_pct_of_proof"])
        rows[f"added, {name}: p99 s (% of proof)"] = _s_pct(v["p99_s"], v["p99_pct_of_proof"])
    h = r["harness"]["machine"]
    rows["machine busy cores (of 2)"] = h["machine_busy_cores"]
    rows["cores: router / bench / other"] = " / ".join(
        f"{h['cores_by_process'][k]:.2f}" for k in ("router", "bench", "other")
    )
    return rows


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _s_pct(s: float | None, pct: float | None) -> str:
    return "–" if s is None or pct is None else f"{s:.3f} ({pct:.1f} %)"


def main(argv: list[str] | None = None) -> int:
    """Run, print the table, write the JSON; exit 1 on a lost or duplicated proof."""
    p = argparse.ArgumentParser(prog="python -m bench.perf.router", description=__doc__)
    p.add_argument("--machines", type=int, default=20)
    p.add_argument("--rate", type=float, default=1000.0, help="proofs/hour at speed 1")
    p.add_argument("--minutes", type=float, default=5.0, help="real minutes of arrivals")
    p.add_argument("--input-mb", type=float, default=50.0)
    p.add_argument("--speed", type=float, default=10.0, help="simulated seconds per real second")
    p.add_argument(
        "--proof-seconds", type=float, default=53.0, help="a PoRep on a stand-in (256 GiB row)"
    )
    p.add_argument("--max-pending", type=int, default=0, help="Curio's (default 1.5 x machines)")
    p.add_argument("--prove-timeout", type=float, default=3600.0, help="Curio's, simulated s")
    p.add_argument("--deadline-minutes", type=float, default=30.0)
    p.add_argument("--drain-minutes", type=float, help="simulated; default the deadline")
    p.add_argument("--faults", action="store_true", help="killed, liar, bad, trickler machines")
    p.add_argument(
        "--min-free-gb", type=float, default=4.0, help="stop the run under this much free memory"
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json-out", type=Path)
    args = p.parse_args(argv)
    # grpc's C core logs every GOAWAY of a stopping stand-in at INFO otherwise.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    result = asyncio.run(run(args))
    print_table(
        f"router: {args.machines} machines, {args.rate:g} proofs/h x speed {args.speed:g}, "
        f"{args.minutes:g} min, {args.input_mb:g} MB inputs",
        _table(result),
    )
    if "faults" in result:
        f = result["faults"]
        print_table(
            "faults",
            {
                "killed mid-proof": f["killed_mid_proof"],
                "every job done before its deadline": f["every_job_on_time"],
                "jobs not on time": f["not_on_time"],
                **{
                    f"{role}: sends / stopped / to last send (proofs)": (
                        f"{m['sends']} / {m['stopped']} / "
                        + (
                            "–"
                            if m["to_last_send_proofs"] is None
                            else f"{m['to_last_send_proofs']:.1f}"
                        )
                    )
                    for role, m in f["machines"].items()
                },
            },
        )
    if result["aborted"]:
        print(f"\n{result['aborted']}: the figures are of a partial run")
    path = write_json("router", result, args.json_out)
    print(f"\nJSON: {path}\nlogs: {result['logs']}")
    c = result["curio"]
    return 1 if c["lost"] or c["duplicates"] or result["aborted"] else 0


if __name__ == "__main__":
    sys.exit(main())
