"""The router's faults end to end with the agent (issue 52): is a machine that
is killed mid-proof, lies, returns bad proofs or trickles *replaced*, and how
soon, in expected proof times?

    .venv/bin/python -m bench.perf.router_faults_agent                 # S=6, ~15 min
    .venv/bin/python -m bench.perf.router_faults_agent --speed 6 --rate 250 --target 300

It runs the local stack as ``fleet-agent up`` does, as a subprocess
(bench/perf/_up_stack.py): Temporal's dev server, the vast.ai simulator
(`--scenario` ideal: nothing fails but what the bench injects), the router
(router mode, its witness in the stack's store) and the worker with the
offline ``autopilot`` policy. ``--sim-demand 0:0`` keeps ``up``'s own Curio
stand-in silent: the bench runs the Curio node itself (simulator/curio,
against the router's address, as an operator's node is outside the stack),
so it has every job's record (deadline, attempts, proofs verified twice),
which ``up``'s stand-in prints only as a summary line. The agent's target is
set with ``fleet-agent config --set`` (`--target`, by default 1.2 x the
Curio `--rate`: demand mode's default headroom).

Then: once the machines serving at the router are expected to carry 80 % of
the rate (`START_SHARE`), the Curio node sends `--rate` proofs/h (Poisson, Curio's 30 min
deadlines); once at least four machines have proved (router witness
``done`` > 0), one fault each goes onto four distinct proving machines
through the simulator's control API (``POST /_sim/cuzk/{id}``,
simulator/cuzk_machine.py): ``killed`` (``dies``: its cuzk dies half-way
through its next proof and the container exits with it), ``bad`` (COMPLETED
with proof bytes that do not verify), ``trickler`` (every answer waits,
Prove never answers), on the three of least expected rate (the fleet keeps
what capacity it can), and ``liar`` (``lies``: GetStatus claims 64 GPUs and
huge totals, proofs honest) on the fourth.

It samples twice a real second the simulator's truth and the store
(bench/perf/_faults_watch.py) and measures for each fault, from the fault
(the killed machine's: its death as the simulator shows it; the others': the
control call), in simulated seconds and in the machine's expected proof
times (the member's ``expected_proofs_per_hour``: 3600/rate, the interval
between its proofs; x its GPUs, one proof's duration on a GPU): the
router's last send to it and when its witness turned failing/dead; the
monitor's signal reaching the agent, the run and the destroy (the agent's
run log and tool journal; the simulator's ``ended_at``); whether its host is
banned (the agent's failed-hosts record) and when; the machines that run
rented, their joining the router (witness ``serving``) and first proof.
Then it stops the arrivals and waits until every job is done or past its
deadline: done before the deadline, lost, proven twice.

**Clocks.** At `--speed` S the simulator, its machines, the Curio node and
the router's witness (``report_speed``) and attempt budgets (``at_speed``:
expected proof times and ``min_attempt_s``) run S simulated seconds per real
one. The agent's timers are Temporal timers, real seconds: the monitor's
poll (``monitor_poll_seconds``, at least 5) and the debounce of a state
change (``p1_debounce_seconds``, P0's too). So S=6 with a 5 s poll is
production's 30 s poll in simulated time; the debounces are set to
production's / S (10 s → 1.67 s) and the worker's vast.ai listing cache to
production's / S (``FLEET_VAST_LIST_TTL_S`` 5 s, ``_STALE_S`` 30 s). Left at
real seconds, and so S times production's in simulated time (reported, not
hidden: `UNSCALED`): the router's witness write (every 5 s) and members read
(2 s) (router/store_sync.py), its GetStatus poll (2 s), timeout (5 s) and
``dead_after_s`` (60 s) (router/config.py), the worker's own work in a run
(CPU and I/O, real seconds: each run's length is in the JSON) and the
worker's clock (``up`` gives the fleet activities the wall clock, not the
simulator's: ``not_proving_minutes`` and ages are judged in real minutes; no
fault here waits on them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench._common import print_table, write_json
from bench.perf._faults_watch import AgentAction, Clocks, Machine, Watch, agent_actions
from bench.perf._up_stack import config_set, sim_get, sim_post, start_up, stop_up
from simulator.curio import CurioConfig, CurioStandIn, JobRecord, arrival_times, summarize
from starter.stack.router import CURIO_INPUT_MB

#: The faults, in the order they go onto the proving machines by expected
#: rate, least first, and the control API's body for each
#: (simulator/cuzk_machine.py `behaviour_spec`). The liar proves honestly:
#: it goes on the largest of the four.
FAULTS: dict[str, dict[str, Any]] = {
    "killed": {"behaviour": "dies", "after_proofs": 0},
    "bad": {"behaviour": "bad"},
    "trickler": {"behaviour": "trickle"},
    "liar": {"behaviour": "lies"},
}
#: The faults whose machine must go: they prove nothing that verifies.
MUST_GO = ("killed", "bad", "trickler")
#: The issue's target: a bad machine replaced within this many expected proof times.
TARGET_PROOFS = 5.0
#: The Curio node starts once the machines serving at the router are expected
#: to prove this share of its rate: the queue that builds while the last
#: ones join (a slow host's parameters take half an hour) is small next to
#: the 30 min deadline.
START_SHARE = 0.8
#: How long the liar is watched, in its proof intervals, before the run may end.
LIAR_WATCH_PROOFS = 10.0
#: Production's real-second timers of the agent the bench divides by the speed.
PRODUCTION = {
    "monitor_poll_seconds": 30.0,
    "p0_debounce_seconds": 2.0,
    "p1_debounce_seconds": 10.0,
    "FLEET_VAST_LIST_TTL_S": 5.0,
    "FLEET_VAST_LIST_STALE_S": 30.0,
}
#: Real-second timers `up` does not scale with its speed: name, real seconds, where.
UNSCALED: list[tuple[str, float, str]] = [
    ("router witness write", 5.0, "router/store_sync.py WITNESS_EVERY_S"),
    ("router members read", 2.0, "router/store_sync.py MEMBERS_EVERY_S"),
    ("router GetStatus poll", 2.0, "router/config.py poll_s"),
    ("router GetStatus timeout", 5.0, "router/config.py status_timeout_s"),
    ("router dead_after_s", 60.0, "router/config.py DEAD_AFTER_S"),
]


def agent_settings(speed: float) -> tuple[dict[str, Any], dict[str, str]]:
    """The agent's config keys and the worker's variables: production's real
    seconds divided by `speed`, so they are production's in simulated time
    (the poll at least 5 s: the config's minimum)."""
    p = PRODUCTION
    config = {
        "monitor_poll_seconds": max(5, round(p["monitor_poll_seconds"] / speed)),
        "p0_debounce_seconds": round(max(0.1, p["p0_debounce_seconds"] / speed), 2),
        "p1_debounce_seconds": round(max(0.1, p["p1_debounce_seconds"] / speed), 2),
    }
    env = {
        "FLEET_VAST_LIST_TTL_S": f"{p['FLEET_VAST_LIST_TTL_S'] / speed:.3f}",
        "FLEET_VAST_LIST_STALE_S": f"{p['FLEET_VAST_LIST_STALE_S'] / speed:.3f}",
    }
    return config, env


# -- the run ---------------------------------------------------------------


def _progress(watch: Watch, node: CurioStandIn | None = None) -> str:
    live = sorted(watch.live(), key=lambda m: m.id)
    phases = ", ".join(
        f"{m.id}:{m.witness.phase if m.witness else '-'}/{m.witness.done if m.witness else 0}"
        for m in live
    )
    curio = ""
    if node is not None:
        s = node.summary()
        curio = f"; curio {s.arrived} arrived, {s.done} done, {s.done_on_time} on time"
    return f"{phases}; serving {watch.serving_rate():.0f}/h{curio}"


async def _inject(watch: Watch, inject_real: list[float]) -> dict[str, Machine]:
    """One fault each on the proving machines of least expected rate; their
    fault times (the killed one's is set when it dies)."""
    targets = sorted(watch.proving(), key=lambda m: (m.rate or 0.0, m.id))[: len(FAULTS)]
    roles: dict[str, Machine] = {}
    for (role, body), m in zip(FAULTS.items(), targets, strict=True):
        wall = time.time()
        await sim_post(watch.client, watch.stack.sim_url, f"/_sim/cuzk/{m.id}", body)
        inject_real.append(wall)
        m.role = role
        m.fault_at = None if role == "killed" else watch.clocks.sim_at(wall)
        roles[role] = m
    return roles


def _settled(
    watch: Watch, roles: dict[str, Machine], actions: dict[int, AgentAction], inject_sim: float
) -> bool:
    """Each machine that must go is gone, the run that destroyed it rented a
    machine that has proved, and the liar was watched `LIAR_WATCH_PROOFS`."""
    for role in MUST_GO:
        m = roles[role]
        action = actions.get(m.id)
        if not m.gone or action is None:
            return False
        rented = [watch.machines[i] for i in action.rented if i in watch.machines]
        if not any(r.first_done is not None for r in rented):
            return False
    liar = roles["liar"]
    return watch.now - inject_sim >= LIAR_WATCH_PROOFS * (liar.interval_s or 60.0)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Bring the stack up, load it, inject the faults, watch; the figures."""
    speed = args.speed
    folder = Path(tempfile.mkdtemp(prefix="router-faults-agent-"))
    config, env = agent_settings(speed)
    target = args.target or round(args.rate * 1.2)
    t_start = time.monotonic()
    load_before = os.getloadavg()
    marks: dict[str, float] = {}
    stack = await start_up(
        folder,
        agent_id=args.agent_id,
        speed=speed,
        seed=args.seed,
        scenario=args.scenario,
        extra_args=["--sim-demand", "0:0"],
        extra_env=env,
    )
    node: CurioStandIn | None = None
    load: asyncio.Task[bool] | None = None
    inject_real: list[float] = []
    try:
        await config_set(stack, {**config, "target_proofs_per_hour": target})
        marks["up"] = time.monotonic() - t_start
        async with httpx.AsyncClient() as client:
            watch = Watch(stack, client, speed)
            try:
                if not await watch.until(
                    lambda: (
                        watch.serving_rate() >= START_SHARE * args.rate
                        and len(watch.live()) >= len(FAULTS)
                    ),
                    args.boot_minutes * 60,
                    "the fleet serving the rate",
                    lambda: _progress(watch),
                ):
                    raise SystemExit("the fleet did not serve the rate in --boot-minutes")
                marks["serving"] = time.monotonic() - t_start
                node = CurioStandIn(
                    CurioConfig(
                        cuzk=stack.router,
                        max_pending=args.max_pending,
                        input_bytes=int(CURIO_INPUT_MB * 1_000_000),
                        speed=speed,
                        seed=args.seed,
                    )
                )
                node.start()
                node_wall0 = time.time() - node.now()
                arrivals = arrival_times(24 * 60, rate_per_hour=args.rate, seed=args.seed)
                load = asyncio.create_task(node.run(arrivals))
                if not await watch.until(
                    lambda: len(watch.proving()) >= len(FAULTS),
                    args.boot_minutes * 60,
                    "four machines proving",
                    lambda: _progress(watch, node),
                ):
                    raise SystemExit("four machines did not prove in --boot-minutes")
                marks["proved"] = time.monotonic() - t_start
                fleet = {m.id: m.rate for m in watch.live()}
                roles = await _inject(watch, inject_real)
                inject_sim = watch.clocks.sim_at(inject_real[0])
                actions: dict[int, AgentAction] = {}

                def settled() -> bool:
                    actions.update(agent_actions(watch.store, stack.agent_id))
                    return _settled(watch, roles, actions, inject_sim)

                all_settled = await watch.until(
                    settled, args.fault_minutes * 60, "the faults", lambda: _progress(watch, node)
                )
                killed = roles["killed"]
                killed.fault_at = killed.down
                marks["faults"] = time.monotonic() - t_start
                load.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await load
                # Every job done, or its deadline passed; the machines still watched.
                within = max(0.0, max(j.deadline for j in node.jobs) - node.now()) + 1.0
                drain = asyncio.create_task(node.wait_all(within))
                await watch.until(
                    drain.done, within + 10, "the drain", lambda: _progress(watch, node)
                )
                drained = await drain
                marks["drained"] = time.monotonic() - t_start
                charges = await sim_get(client, stack.sim_url, "/_sim/charges")
                actions = agent_actions(watch.store, stack.agent_id)
                runs = _runs(watch)
            finally:
                watch.close()
        for row in charges["instances"]:
            m = watch.machines.get(row["id"])
            if m is not None and row.get("ended_at") is not None:
                m.destroyed = float(row["ended_at"])
        jobs = list(node.jobs)
        summary = node.summary()
    finally:
        if load is not None and not load.done():
            load.cancel()
        if node is not None:
            await node.close()
        await stop_up(stack)
    marks["total"] = time.monotonic() - t_start

    after = [j for j in jobs if node_wall0 + j.submitted >= inject_real[0]]
    faults = {r: _fault_row(watch, m, actions.get(m.id)) for r, m in roles.items()}
    for m in roles.values():
        # How long after its fault the bench looked: a replacement not serving
        # by then is reported as "> window".
        faults[m.role]["window_s"] = _since(watch.now, m.fault_at)
    return {
        "args": vars(args) | {"target": target},
        "folder": str(folder),
        "agent_config": config,
        "worker_env": env,
        "clocks": _clock_notes(speed, config),
        "real_s": {k: round(v, 1) for k, v in marks.items()},
        "faults_settled": all_settled,
        "fleet_at_faults": fleet,
        "capacity_at_faults": round(sum(r or 0.0 for r in fleet.values()), 1),
        "capacity_lost": round(sum(roles[r].rate or 0.0 for r in MUST_GO), 1),
        "faults": faults,
        "target_met": all(faults[r]["replaced_within_target"] for r in MUST_GO),
        "curio": summary.model_dump(),
        "curio_after_faults": summarize(after, speed=speed).model_dump(),
        "late_jobs": _late(jobs, speed, node_wall0, watch.clocks, inject_sim),
        "all_jobs_ended": drained,
        "every_job_on_time": summary.done_on_time == summary.arrived,
        "agent_runs": runs,
        "sim_counters": watch.counters,
        "machines": [_machine_json(m, inject_sim) for m in watch.machines.values()],
        "report_minus_sim_s": watch.clocks.offset,
        "samples": watch.samples,
        # The machine's load (2 shared cores): the worker's own work is real seconds.
        "loadavg_before_after": [load_before, os.getloadavg()],
    }


def _runs(watch: Watch) -> dict[str, Any]:
    """The agent's runs: how many, and their lengths in real seconds (the
    worker's own work, which the speed does not scale)."""
    records = [r for r in watch.store.run_reads.list_runs(watch.stack.agent_id, limit=10_000)]
    lengths = sorted(
        (r.ended_at - r.started_at).total_seconds() for r in records if r.ended_at is not None
    )
    return {
        "runs": len(records),
        "real_s_median": lengths[len(lengths) // 2] if lengths else None,
        "real_s_max": lengths[-1] if lengths else None,
    }


# -- the figures -------------------------------------------------------------


def _since(at: float | None, origin: float | None) -> float | None:
    return None if at is None or origin is None else round(at - origin, 1)


def _proofs(seconds: float | None, interval: float | None) -> float | None:
    return None if seconds is None or not interval else round(seconds / interval, 2)


def _fault_row(watch: Watch, m: Machine, action: AgentAction | None) -> dict[str, Any]:
    """The figures of one faulty machine, simulated seconds from its fault
    (and, as `*_proofs`, in its expected proof intervals)."""
    c, f, w = watch.clocks, m.fault_at, m.witness
    last_sent = c.from_report(w.last_sent_at) if w and w.last_sent_at else None
    origin = f if f is not None else 0.0
    mark = m.phase_since({"failing", "dead"}, origin)
    row: dict[str, Any] = {
        "instance": m.id,
        "gpu": f"{m.gpu} x{m.gpus}",
        "expected_proofs_per_hour": m.rate,
        "proof_interval_s": None if m.interval_s is None else round(m.interval_s, 1),
        "proof_duration_s": None if m.interval_s is None else round(m.interval_s * m.gpus, 1),
        "router_last_send_s": None
        if last_sent is None or f is None
        else max(0.0, round(last_sent - f, 1)),
        "router_mark": next((p for t, p in m.phases if t == mark), None),
        "router_mark_s": _since(mark, f),
        "sent_done_failed_rejected_lost": None
        if w is None
        else [w.sent, w.done, w.failed, w.rejected, w.lost],
        "max_in_flight": m.max_in_flight,
        "signalled_s": _since(
            c.sim_of(action.signalled) if action and action.signalled else None, f
        ),
        "run": None if action is None else action.run,
        "run_started_s": _since(c.sim_of(action.run_started) if action else None, f),
        "destroy_called_s": _since(c.sim_of(action.destroy_called) if action else None, f),
        "destroyed_s": _since(m.destroyed, f),
        "banned": m.banned is not None,
        "ban_reason": None if m.banned is None else m.banned["reason"],
        "banned_s": _since(m.banned["at"] if m.banned else None, f),
    }
    rented = [watch.machines[i] for i in (action.rented if action else []) if i in watch.machines]
    serving = [s for r in rented if (s := r.phase_since({"serving"}, r.created)) is not None]
    proved = [r.first_done for r in rented if r.first_done is not None]
    row["replacements"] = [
        {"instance": r.id, "gpu": f"{r.gpu} x{r.gpus}", "expected_proofs_per_hour": r.rate}
        for r in rented
    ]
    row["replacement_rented_s"] = _since(min((r.created for r in rented), default=None), f)
    row["replacement_serving_s"] = _since(min(serving, default=None), f)
    row["replacement_first_proof_s"] = _since(min(proved, default=None), f)
    for key in [k for k in row if k.endswith("_s") and k != "proof_interval_s"]:
        if key != "proof_duration_s":
            row[key.removesuffix("_s") + "_proofs"] = _proofs(row[key], m.interval_s)
    row["replaced_within_target"] = (
        row["destroyed_proofs"] is not None
        and row["replacement_rented_proofs"] is not None
        and max(row["destroyed_proofs"], row["replacement_rented_proofs"]) <= TARGET_PROOFS
    )
    return row


def _late(
    jobs: list[JobRecord], speed: float, wall0: float, clocks: Clocks, inject_sim: float
) -> list[dict[str, Any]]:
    """Each job not done before its deadline: its arrival (simulated seconds
    from the injection), how late, or its state if never done."""
    return [
        {
            "request_id": j.request_id,
            "arrived_s": round(clocks.sim_at(wall0 + j.submitted) - inject_sim, 1),
            "state": j.state,
            "late_s": None if j.done_at is None else round((j.done_at - j.deadline) * speed, 1),
            "attempts": [a.outcome for a in j.attempts],
        }
        for j in jobs
        if j.done_at is None or j.done_at > j.deadline
    ]


def _machine_json(m: Machine, inject_sim: float) -> dict[str, Any]:
    return {
        "id": m.id,
        "gpu": f"{m.gpu} x{m.gpus}",
        "machine_id": m.machine_id,
        "role": m.role,
        "expected_proofs_per_hour": m.rate,
        "created_s": _since(m.created, inject_sim),
        "destroyed_s": _since(m.destroyed, inject_sim),
        "first_done_s": _since(m.first_done, inject_sim),
        "phases": [(_since(t, inject_sim), p) for t, p in m.phases],
        "max_in_flight": m.max_in_flight,
        "witness": None if m.witness is None else m.witness.model_dump(mode="json"),
        "banned": m.banned,
    }


def _clock_notes(speed: float, config: dict[str, Any]) -> dict[str, Any]:
    """Each timer: its real seconds here, simulated seconds, production's."""
    scaled = {
        "monitor poll": (config["monitor_poll_seconds"], PRODUCTION["monitor_poll_seconds"]),
        "P1 debounce (a state change)": (
            config["p1_debounce_seconds"],
            PRODUCTION["p1_debounce_seconds"],
        ),
        "vast.ai listing cache": (
            PRODUCTION["FLEET_VAST_LIST_TTL_S"] / speed,
            PRODUCTION["FLEET_VAST_LIST_TTL_S"],
        ),
    }
    return {
        "speed": speed,
        "scaled": {
            k: {"real_s": r, "sim_s": round(r * speed, 1), "production_s": p}
            for k, (r, p) in scaled.items()
        },
        "unscaled": {
            k: {"real_s": r, "sim_s": r * speed, "production_s": r, "where": where}
            for k, r, where in UNSCALED
        },
    }


# -- output ----------------------------------------------------------------


def _cell(row: dict[str, Any], key: str) -> str:
    seconds, proofs = row.get(f"{key}_s"), row.get(f"{key}_proofs")
    if seconds is None and key.startswith("replacement_") and row.get("replacements"):
        return f"> {row['window_s']:.0f} s"  # not yet when the bench stopped looking
    if seconds is None:
        return "–"
    return f"{seconds:.0f} s ({proofs:.1f})" if proofs is not None else f"{seconds:.0f} s"


#: The table's columns after the fault and the machine: (title, figure).
COLUMNS = [
    ("router last send", "router_last_send"),
    ("router marks it", "router_mark"),
    ("agent signalled", "signalled"),
    ("agent destroys", "destroyed"),
    ("host banned", "banned"),
    ("replacement rented", "replacement_rented"),
    ("replacement serving", "replacement_serving"),
    ("replacement 1st proof", "replacement_first_proof"),
]


def fault_table(result: dict[str, Any]) -> list[list[str]]:
    """Rows of the faults table, header first: seconds (simulated) from the
    fault, and in the machine's expected proof intervals."""
    rows = [["fault", "machine", "proof interval / duration", *(t for t, _ in COLUMNS)]]
    for role, f in result["faults"].items():
        cells = []
        for _, key in COLUMNS:
            cell = _cell(f, key)
            if key == "router_mark" and f["router_mark"]:
                cell = f"{f['router_mark']} {cell}"
            cells.append(cell)
        rows.append(
            [
                role,
                f"{f['instance']} {f['gpu']}, {f['expected_proofs_per_hour'] or 0:.0f}/h",
                f"{f['proof_interval_s']} s / {f['proof_duration_s']} s",
                *cells,
            ]
        )
    return rows


def markdown(rows: list[list[str]]) -> str:
    head, *body = rows
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in body])


def summary_rows(result: dict[str, Any]) -> dict[str, Any]:
    c, a = result["curio"], result["curio_after_faults"]
    r = result["real_s"]
    return {
        "real s: up / serving / 4 proving / faults / drained": " / ".join(
            f"{r.get(k, 0):.0f}" for k in ("up", "serving", "proved", "faults", "drained")
        ),
        "fleet at the faults (proofs/h expected)": (
            f"{len(result['fleet_at_faults'])} machines, {result['capacity_at_faults']:g}"
        ),
        "lost with killed, bad, trickler": result["capacity_lost"],
        "replaced within 5 proof times (destroy and rental)": result["target_met"],
        "arrived / done / on time": f"{c['arrived']} / {c['done']} / {c['done_on_time']}",
        "every job done before its deadline": result["every_job_on_time"],
        "lost / proven twice": f"{c['lost']} / {c['duplicates']}",
        "Curio failures": c["failures"] or "-",
        "arrived after the faults / on time": f"{a['arrived']} / {a['done_on_time']}",
        "agent runs / median / max real s": (
            f"{result['agent_runs']['runs']} / {result['agent_runs']['real_s_median']:.1f} / "
            f"{result['agent_runs']['real_s_max']:.1f}"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    """Run once, print the tables, write the JSON (and `--md-out`)."""
    p = argparse.ArgumentParser(
        prog="python -m bench.perf.router_faults_agent",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--speed", type=float, default=6.0, help="simulated seconds per real second")
    p.add_argument("--rate", type=float, default=250.0, help="Curio's proofs/h (simulated)")
    p.add_argument("--target", type=float, default=0.0, help="the agent's (default 1.2 x rate)")
    p.add_argument("--max-pending", type=int, default=20, help="Curio's [Cuzk] MaxPending")
    p.add_argument("--scenario", default="ideal")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--agent-id", default="faults")
    p.add_argument("--boot-minutes", type=float, default=8.0, help="real; fleet up, proving")
    p.add_argument("--fault-minutes", type=float, default=6.0, help="real; faults replaced")
    p.add_argument("--json-out", type=Path)
    p.add_argument("--md-out", type=Path, help="the faults table as Markdown")
    args = p.parse_args(argv)
    result = asyncio.run(run(args))
    print_table(
        f"router faults with the agent: speed {args.speed:g}, {args.rate:g} proofs/h, "
        f"target {result['args']['target']:g}",
        summary_rows(result),
    )
    rows = fault_table(result)
    print("\nfrom each fault, simulated seconds (expected proof intervals):\n")
    print(markdown(rows))
    path = write_json("router_faults_agent", result, args.json_out)
    if args.md_out is not None:
        args.md_out.write_text(markdown(rows) + "\n")
    print(f"\nJSON: {path}\nstack folder: {result['folder']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
