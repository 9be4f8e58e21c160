"""`fleet-agent up --sim-demand`: demand mode end to end on the local stack.

A real `up` (dev server, simulator serving demand, worker, agent) in a
scratch directory, switched to demand mode with the very command its banner
prints; the agent's target then follows the simulator's demand, and the
store keeps the readings. Plus the option's parsing, without a stack.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fleet_agent.demand.settings import DemandEnv
from fleet_agent.store import Store
from fleet_agent.store.demand_history import DemandHistory
from starter.agent_client import CliError, UsageError
from starter.stack_demand import demand_env, demand_lines, stack_demand, suggested_max_target
from tests.helpers import eventually
from tests.ports import free_port
from tests.test_stack_ports import banner_command, start_up, up_env

AGENT = "fleet-agent"


async def _cli(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = await asyncio.to_thread(
        subprocess.run, argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout


async def test_the_agent_follows_the_simulators_demand_on_the_local_stack(tmp_path: Path) -> None:
    port = free_port()
    # As `FLEET_PROVER_MODE=curio_on_host make run TEMPORAL_PORT=P
    # SIM_DEMAND=default` starts it (the old path: the worker reads the
    # simulator's /demand; router mode reads the router's queue); the
    # simulator at a simulated minute a second, so work queues up in seconds.
    env = up_env(
        TEMPORAL_PORT=str(port),
        TEMPORAL_UI_PORT=str(free_port()),
        FLEET_PROVER_MODE="curio_on_host",
    )
    up = await start_up(tmp_path, "--sim-demand", "default", "--sim-speed", "60", env=env)
    try:
        await up.until("agent started", within=60)
        line = re.search(r"demand:     simulator at (http://\S+/demand) \(", up.text)
        assert line and "FLEET_DEMAND_SOURCE=http, FLEET_DEMAND_URL exported" in up.text, up.text
        # The operator's shell: none of the stack's settings but what the line sets.
        argv, assigned = banner_command(up.text, "config")
        assert assigned == {"TEMPORAL_PORT": str(port)}, assigned
        assert argv[-4:] == ["--set", "target_mode=demand", "--set", "max_target=600"], argv
        shell = up_env() | assigned
        status_argv = [*banner_command(up.text, "status")[0], "--json"]

        async def status() -> dict[str, Any]:
            return dict(json.loads(await _cli(status_argv, tmp_path, shell)))

        start_target = (await status())["config"]["target_proofs_per_hour"]
        # The banner's command, with a fast poll so the test takes seconds.
        await _cli([*argv, "--set", "monitor_poll_seconds=5"], tmp_path, shell)

        async def moved() -> dict[str, Any]:
            st = await status()
            moved = st["config"]["target_proofs_per_hour"] != start_target
            return st if st["demand"] is not None and moved else {}

        st = await eventually(moved, timeout=45, interval=1, what="a target set from demand")
        assert st["config"]["target_mode"] == "demand"
        assert st["demand"]["action"] == "raise" and st["demand"]["point"]["queued"] > 0, st
        assert 0 < st["config"]["target_proofs_per_hour"] <= 600
        # The operator's view: the banner's `status`, its demand line.
        # Demand keeps moving the target between two reads, so the text is
        # checked against its own figures (one query), not the JSON's.
        shown = await _cli(banner_command(up.text, "status")[0], tmp_path, shell)
        assert "demand within [0, 600] proofs/h" in shown, shown
        target = re.search(r"  target: +([\d.]+) proofs/h", shown)
        change = re.search(r"→ ([\d.]+): (raise|lower)", shown)
        assert target and change, shown
        assert target.group(1) == change.group(1) and 0 < float(target.group(1)) <= 600, shown

        # A worker added to the stack reads the same demand.
        added = await start_up(tmp_path, "--add-worker", env=env)
        await added.until("worker added to the running stack")
        assert f"demand http at {line.group(1)}." in added.text, added.text
        assert await added.finish(signal.SIGINT) == 0, added.text
    finally:
        code = await up.finish(signal.SIGINT)
    assert code == 0, up.text[-3000:]
    store = Store(f"sqlite:///{tmp_path / 'var' / f'stack-{port}' / 'fleet-agent.db'}")
    try:
        points = DemandHistory(store).series(AGENT, datetime(2000, 1, 1, tzinfo=UTC))
    finally:
        store.dispose()
    assert points and points[-1].arrived_total > 0, points


def test_sim_demand_takes_default_or_a_curve_and_names_a_bad_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VAST_API_KEY", raising=False)
    assert stack_demand(None) is None
    default = stack_demand("default")
    assert default is not None and default.burst_rate_per_day == 2
    assert default.deadline_minutes == 30 and suggested_max_target(default) == 600
    own = stack_demand("0:10,12:40")
    assert own is not None and own.curve == ((0.0, 10.0), (12.0, 40.0))
    assert suggested_max_target(own) == 100
    with pytest.raises(UsageError, match="--sim-demand: curve"):
        stack_demand("noon:lots")
    monkeypatch.setenv("VAST_API_KEY", "k")
    with pytest.raises(CliError, match="runs only without VAST_API_KEY"):
        stack_demand("default")


def test_the_operators_demand_source_wins_and_ours_is_restored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    for name in ("FLEET_DEMAND_SOURCE", "FLEET_DEMAND_URL", "FLEET_ENV_FILE"):
        monkeypatch.delenv(name, raising=False)
    with demand_env("http://127.0.0.1:9/demand") as wiring:
        assert wiring.exported
        assert os.environ["FLEET_DEMAND_SOURCE"] == "http"
        assert os.environ["FLEET_DEMAND_URL"] == "http://127.0.0.1:9/demand"
    assert "FLEET_DEMAND_SOURCE" not in os.environ and "FLEET_DEMAND_URL" not in os.environ

    monkeypatch.setenv("FLEET_DEMAND_SOURCE", "none")  # set, even to none: theirs
    with demand_env("http://127.0.0.1:9/demand") as wiring:
        assert not wiring.exported and "FLEET_DEMAND_URL" not in os.environ
    assert os.environ["FLEET_DEMAND_SOURCE"] == "none"

    # The banner names the source the worker reads, and that it is not ours.
    theirs = DemandEnv.load(
        {"FLEET_DEMAND_SOURCE": "curio", "FLEET_DEMAND_URL": "http://10.0.0.5:4701"}
    )
    line, switch = demand_lines(wiring, theirs, stack_demand("default"))
    assert switch is None and line is not None
    assert "curio at http://10.0.0.5:4701 (your FLEET_DEMAND_SOURCE wins" in line, line
    assert demand_lines(None, DemandEnv.load({}), None) == (None, None), "no demand: no line"
