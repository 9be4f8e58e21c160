"""`fleet-agent up --sim-demand`: the Snark Market end to end on the local stack.

A real `up` (dev server, simulator running the Snark Market, worker, agent)
in a scratch directory: the node set up, the worker's variables exported,
the fresh agent in demand mode reading the market, renting, and the node
proving on the machine it rented; the store keeps the readings. Plus the
option's parsing and the exports, without a stack.
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

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from fleet_agent.demand.settings import DemandEnv
from fleet_agent.store import Store
from fleet_agent.store.demand_history import DemandHistory
from simulator.curio.address import key_address
from starter.agent_client import CliError, UsageError
from starter.stack.demand import (
    DemandWiring,
    demand_env,
    demand_lines,
    stack_demand,
    suggested_max_target,
)
from starter.stack.market import STACK_WALLET_SEED, market_env, market_stack_config
from starter.stack.sim import prover_mode
from tests.helpers import eventually
from tests.helpers.ports import free_port
from tests.helpers.stack import banner_command, start_up, up_env

AGENT = "fleet-agent"


async def _cli(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = await asyncio.to_thread(
        subprocess.run, argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout


#: What the operator may have set that the stack would otherwise export.
_OURS = (
    "FLEET_PROVER_MODE",
    "FLEET_DEMAND_SOURCE",
    "FLEET_DEMAND_URL",
    "FLEET_DEMAND_METRICS_URL",
    "FLEET_MARKET_SOURCE",
    "FLEET_MARKET_PRICE_URL",
    "FLEET_FIL_USD_URL",
)


async def test_the_local_stack_runs_the_snark_market_on_the_agents_fleet(tmp_path: Path) -> None:
    port = free_port()
    # As `make run TEMPORAL_PORT=P SIM_DEMAND=0:1200` starts it: no prover
    # mode set, so the Snark Market runs, its node proving on the machines
    # the agent rents; the simulator at two simulated minutes a second, so a
    # machine boots and fetches its parameters in a minute. Clients ask for
    # more than the other providers prove, from 08:00 UTC (a simulated
    # morning, whenever the test runs): at the default curve the node's first
    # asks, priced from a market that moves an hour every 30 s, could wait
    # longer than the test for work the other providers take (measured at
    # 16:42 UTC: none in 150 s; at 08:00 and 1,200 an hour: a proof in 44 s).
    env = {
        k: v
        for k, v in up_env(TEMPORAL_PORT=str(port), TEMPORAL_UI_PORT=str(free_port())).items()
        if k not in _OURS
    }
    argv = ("--sim-demand", "0:1200", "--sim-speed", "120", "--sim-start", "08:00")
    up = await start_up(tmp_path, *argv, env=env)
    try:
        await up.until("agent started", within=60)
        found = re.search(r"demand:     the Snark Market's Curio node at (http://\S+) \(", up.text)
        assert found, up.text
        curio = found.group(1)
        assert (
            "(FLEET_DEMAND_SOURCE=curio, FLEET_DEMAND_URL, FLEET_DEMAND_METRICS_URL exported)"
            in up.text
        )
        assert (
            f"market:     Snark Market at {curio}: node wallet set, requests off, 0.005 FIL/P, "
            "500 challenge proofs (FLEET_MARKET_SOURCE=curio, FLEET_MARKET_PRICE_URL, "
            "FLEET_FIL_USD_URL exported)" in up.text
        ), up.text
        # No router, and no switch to print: the fresh agent starts in demand mode.
        assert "router:" not in up.text and "target_mode=demand" not in up.text, up.text
        record = json.loads((tmp_path / "var" / f"stack-{port}.json").read_text())
        assert record["curio_url"] == curio and record["demand_url"] is None
        shell = up_env() | {"TEMPORAL_PORT": str(port)}
        status_argv = [*banner_command(up.text, "status")[0], "--json"]

        async def status() -> dict[str, Any]:
            return dict(json.loads(await _cli(status_argv, tmp_path, shell)))

        config = (await status())["config"]
        assert (config["target_mode"], config["max_target"]) == ("demand", 2400)
        assert (config["market_mode"], config["market_challenges"]) == ("snark", 500)
        async with httpx.AsyncClient(base_url=curio, timeout=10) as web:
            # The node as the stack set it up, read as Curio's GUI reads it.
            rpc = {"jsonrpc": "2.0", "method": "CurioWeb.PSGetMeta", "params": [], "id": 1}
            meta = (await web.post("/api/webrpc/v0", json=rpc)).json()["result"]
            # Requests off: the agent turns them on once a machine proves.
            assert not meta["enabled"] and meta["price"] == "0.005"
            assert meta["wallet"] == key_address(STACK_WALLET_SEED)
            # The public figures the worker is pointed at.
            price = (await web.get("/v0/proofs/client/current-price")).json()
            assert price["price_nfil"] > 0 and price["fee_denom"] == 1
            fil = await web.get("/api/v3/simple/price?ids=filecoin&vs_currencies=usd")
            assert fil.json() == {"filecoin": {"usd": 2.5}}

            # The agent holds one machine (min_target), and once it proves it
            # turns requests on; the node's work then proves on the fleet.
            async def proved() -> dict[str, Any]:
                fleet = (await web.get("/_sim/snark-market")).json()["node"]["fleet"]
                return dict(fleet) if fleet["proved"] else {}

            fleet = await eventually(
                proved, timeout=150, interval=1, what="a proof by a machine of the fleet"
            )
        assert fleet["machines"], fleet
        st = await status()
        assert st["demand"] is not None and st["config"]["target_proofs_per_hour"] > 0, st
        async with httpx.AsyncClient(base_url=curio, timeout=10) as web:
            meta = (await web.post("/api/webrpc/v0", json=rpc)).json()["result"]
            assert meta["enabled"], meta

        # `status` shows the business: slots, price, revenue and profit.
        text_argv = banner_command(up.text, "status")[0]

        async def business() -> str:
            shown = await _cli(text_argv, tmp_path, shell)
            return shown if "revenue" in shown and "slots" in shown else ""

        shown = await eventually(business, timeout=120, interval=2, what="the market block")
        for word in ("slots", "price", "revenue", "profit"):
            assert word in shown, shown
        db = f"sqlite:///{tmp_path / 'var' / f'stack-{port}' / 'fleet-agent.db'}"

        def asked() -> bool:
            # The Curio source counts the node's asks as arrivals.
            store = Store(db)
            try:
                points = DemandHistory(store).series(AGENT, datetime(2000, 1, 1, tzinfo=UTC))
            finally:
                store.dispose()
            return bool(points) and points[-1].arrived_total > 0

        await eventually(asked, timeout=120, interval=2, what="the node's asks read as demand")
        # The monitor read the market at each poll, and no task of it failed
        # (a negative gauge value once failed every one: workflows/metrics.py).
        temporal = await Client.connect(f"127.0.0.1:{port}", data_converter=pydantic_data_converter)
        history = await temporal.get_workflow_handle(f"{AGENT}/monitor").fetch_history()
        kinds = [e.event_type for e in history.events]
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds
        reads = [
            e
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
            and e.activity_task_scheduled_event_attributes.activity_type.name == "observe_market"
        ]
        assert len(reads) > 2, kinds

        # A worker added to the stack reads the same market.
        added = await start_up(tmp_path, "--add-worker", env=env)
        await added.until("worker added to the running stack")
        assert f"demand curio at {curio}." in added.text, added.text
        assert await added.finish(signal.SIGINT) == 0, added.text
    finally:
        code = await up.finish(signal.SIGINT)
    assert code == 0, up.text[-3000:]


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


_CURIO = "http://127.0.0.1:9"
_MARKET_VARS = {
    "FLEET_DEMAND_SOURCE": "curio",
    "FLEET_DEMAND_URL": _CURIO,
    "FLEET_DEMAND_METRICS_URL": _CURIO,
    "FLEET_MARKET_SOURCE": "curio",
    "FLEET_MARKET_PRICE_URL": f"{_CURIO}/v0/proofs/client/current-price",
    "FLEET_FIL_USD_URL": f"{_CURIO}/api/v3/simple/price?ids=filecoin&vs_currencies=usd",
}


def _ours_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    for name in [*_MARKET_VARS, "FLEET_ENV_FILE", "FLEET_PROVER_MODE"]:
        monkeypatch.delenv(name, raising=False)


def test_the_market_stack_exports_the_workers_market_and_restores_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _ours_only(monkeypatch, tmp_path)
    with market_env(_CURIO) as wiring:
        assert {k: os.environ.get(k) for k in _MARKET_VARS} == _MARKET_VARS
        assert wiring == DemandWiring(_CURIO, exported=True, source="curio", market=True)
    assert not any(k in os.environ for k in _MARKET_VARS)
    curve = stack_demand("default")
    assert curve is not None
    patch = market_stack_config(curve, wiring)
    assert patch is not None
    assert patch.model_dump(exclude_unset=True) == {
        "target_mode": "demand",
        "max_target": 600,
        "min_target": 30,
        "market_mode": "snark",
        "market_challenges": 500,
        "market_min_price_nfil": 2_000_000,
        "market_max_price_nfil": 20_000_000,
    }
    line, _ = demand_lines(wiring, DemandEnv.load({}), curve)
    assert line == (
        f"  demand:     the Snark Market's Curio node at {_CURIO} (FLEET_DEMAND_SOURCE=curio, "
        "FLEET_DEMAND_URL, FLEET_DEMAND_METRICS_URL exported)"
    )
    # --sim-demand picks the market's prover mode unless the operator chose one.
    assert (prover_mode(True), prover_mode(False)) == ("curio_on_host", "router")
    monkeypatch.setenv("FLEET_PROVER_MODE", "router")
    assert prover_mode(True) == "router"


def test_the_operators_sources_win_each_for_its_own_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _ours_only(monkeypatch, tmp_path)
    curve = stack_demand("default")
    assert curve is not None
    monkeypatch.setenv("FLEET_DEMAND_SOURCE", "none")
    with market_env(_CURIO) as wiring:
        assert not wiring.exported and wiring.market
        assert os.environ["FLEET_DEMAND_SOURCE"] == "none"
        assert "FLEET_DEMAND_URL" not in os.environ
        assert os.environ["FLEET_MARKET_SOURCE"] == "curio"
    # No demand mode without our demand; the market's business still.
    patch = market_stack_config(curve, wiring)
    assert patch is not None
    assert patch.model_dump(exclude_unset=True) == {
        "market_mode": "snark",
        "market_challenges": 500,
        "market_min_price_nfil": 2_000_000,
        "market_max_price_nfil": 20_000_000,
    }
    monkeypatch.delenv("FLEET_DEMAND_SOURCE")
    (tmp_path / ".env").write_text("FLEET_MARKET_SOURCE=none\n")
    with market_env(_CURIO) as wiring:
        assert wiring.exported and not wiring.market
        assert os.environ["FLEET_DEMAND_SOURCE"] == "curio"
        for name in ("FLEET_MARKET_SOURCE", "FLEET_MARKET_PRICE_URL", "FLEET_FIL_USD_URL"):
            assert name not in os.environ, name
    patch = market_stack_config(curve, wiring)
    assert patch is not None
    assert patch.model_dump(exclude_unset=True) == {
        "target_mode": "demand",
        "max_target": 600,
        "min_target": 30,
    }
    assert not any(k in os.environ for k in _MARKET_VARS)
