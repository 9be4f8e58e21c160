"""`fleet-agent up` as a subprocess with its own dev server on free ports:
`--check` runs the stack and exits zero, and `up` serves until SIGTERM, then
stops everything."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from fleet_agent.store import AgentConfigs, RouterMembers, RouterWitness, Store
from tests.helpers import eventually, finished_runs
from tests.helpers.cli import Result, cli
from tests.helpers.ports import free_port

pytestmark = pytest.mark.devserver


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def up_command(tmp_path: Path, *extra: str) -> tuple[list[str], dict[str, str], int]:
    """`fleet-agent up` as the console script runs it, on free ports, autopilot, temp files."""
    port, ui_port = free_port(), free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"ANTHROPIC_API_KEY", "FLEET_LLM_PROVIDER", "VAST_API_KEY", "VAST_API_URL"}
    }
    env |= {
        "FLEET_DATABASE_URL": f"sqlite:///{tmp_path / 'fleet.db'}",
        "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        # Tests run in parallel: the console on a port of its own, no metrics.
        "CONSOLE_PORT": str(free_port()),
        "METRICS_PORT": "off",
        # The code under test, whichever checkout the environment has installed.
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    argv = [
        sys.executable,
        "-c",
        "from starter.cli import main; main()",
        "up",
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        "--db-filename",
        str(tmp_path / "temporal.db"),
        *extra,
    ]
    return argv, env, port


async def stop(proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
    """SIGTERM (so `up` stops its dev server too) and collect the rest of the output."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return await asyncio.wait_for(proc.communicate(), timeout=30)
    except TimeoutError:
        proc.kill()
        raise


async def test_up_check_runs_the_stack_and_exits_zero(tmp_path: Path) -> None:
    argv, env, port = up_command(tmp_path, "--check")
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        await stop(proc)
    text = out.decode()
    assert proc.returncode == 0, (text, err.decode()[-2000:])
    assert "started here" in text and "LLM:        autopilot" in text
    assert "simulator at http://127.0.0.1:" in text
    assert "check: run #1 ok" in text
    # Hints name commands that work as shown from the checkout (not on PATH).
    assert '.venv/bin/fleet-agent ask "how is the fleet?"' in text
    assert ".venv/bin/temporal workflow query --address" in text
    assert not listening(port), "the dev server outlived `up --check`"
    store = Store(env["FLEET_DATABASE_URL"])
    try:
        assert [r.run for r in finished_runs(store, "fleet-agent")] == [1]
    finally:
        store.dispose()

    # The agent stays running in the dev server's database. With its store
    # gone, `up` refuses to start it on a new, empty one...
    _delete_store(tmp_path)
    refused = await _up_to_exit(argv, env, tmp_path)
    assert refused.code == 1, refused
    assert "does not exist" in refused.err and "'fleet-agent'" in refused.err, refused
    assert "--new-store" in refused.err and not (tmp_path / "fleet.db").exists()
    assert not listening(port), "the dev server outlived a refused `up`"

    # ... until told to: the agent goes on with its run numbers in a new store.
    accepted = await _up_to_exit([*argv, "--new-store"], env, tmp_path)
    assert accepted.code == 0, accepted
    assert "check: run #2 ok" in accepted.out
    store = Store(env["FLEET_DATABASE_URL"])
    try:
        assert [r.run for r in finished_runs(store, "fleet-agent")] == [2]
    finally:
        store.dispose()


def _delete_store(folder: Path) -> None:
    """The SQLite store `up_command` points at, with its WAL files, as an accident would."""
    for path in folder.glob("fleet.db*"):
        path.unlink()


async def _up_to_exit(argv: list[str], env: dict[str, str], cwd: Path) -> Result:
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        await stop(proc)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode()[-3000:])


async def test_up_serves_until_sigterm_then_stops_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, env, port = up_command(tmp_path, "--agent-id", "up-test")
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        seen: list[str] = []
        async with asyncio.timeout(40):
            while not any(line.startswith("agent started") for line in seen):
                line = (await proc.stdout.readline()).decode()
                assert line, f"`up` ended early: {''.join(seen)}"
                seen.append(line)
        result = await cli(
            capsys, "status", "--json", "--agent-id", "up-test", "--address", f"127.0.0.1:{port}"
        )
        assert result.code == 0, result
        assert json.loads(result.out)["agent_id"] == "up-test"
    finally:
        rest, err = await stop(proc)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "stopping" in rest.decode()
    assert not listening(port), "the dev server outlived `up`"


async def test_up_runs_the_router_and_proofs_flow_to_a_machine_of_the_fleet(
    tmp_path: Path,
) -> None:
    """Router mode, `up`'s default on its simulator: the stack's router
    (starter/stack/router.py) serves the Curio stand-in, and a machine the
    agent rented proves through it. The witness is the router's own record
    (fa_router_witness), kept in the stack's store."""
    # Speed 100: a machine's boot and parameter fetch (47 GiB) take seconds;
    # the ideal scenario: no host fault to wait out.
    argv, env, port = up_command(
        tmp_path, "--agent-id", "routed", "--sim-speed", "100", "--sim-scenario", "ideal"
    )
    env.pop("FLEET_PROVER_MODE", None)
    env.pop("FLEET_DEMAND_SOURCE", None)
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=tmp_path, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    store = Store(env["FLEET_DATABASE_URL"])
    try:
        seen: list[str] = []
        async with asyncio.timeout(40):
            while not any(line.startswith("agent started") for line in seen):
                line = (await proc.stdout.readline()).decode()
                assert line, f"`up` ended early: {''.join(seen)}"
                seen.append(line)
        text = "".join(seen)
        assert "router:     router at 127.0.0.1:" in text, text
        assert "Curio's [Cuzk] Address" in text
        assert "FLEET_DEMAND_SOURCE=router exported" in text
        # The CA is the stack's own, kept with its other files.
        assert _router_cas(tmp_path) == [_stack_folder(tmp_path) / "router-ca"]
        # The fresh agent follows the router's queue: the proofs that wait
        # while the first machine boots are demand it catches up on.
        config = await eventually(
            lambda: AgentConfigs(store).load("routed"), timeout=30, what="the agent's config"
        )
        assert (config.target_mode, config.max_target) == ("demand", 150), config
        proved: dict[int, int] = {}
        async with asyncio.timeout(80):
            while not proved:
                await asyncio.sleep(1)
                members = {m.instance_id for m in RouterMembers(store).load("routed")}
                witnesses, _, _ = RouterWitness(store).load("routed")
                proved = {i: w.done for i, w in witnesses.items() if w.done and i in members}
    finally:
        store.dispose()
        rest, err = await stop(proc)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "stopping" in rest.decode()
    assert not listening(port), "the dev server outlived `up`"


def _stack_folder(tmp_path: Path) -> Path:
    """The files' folder of `up_command`'s stack (a named Temporal database's)."""
    (folder,) = tmp_path.glob("var/stack-temporal-*")
    return folder


def _router_cas(tmp_path: Path) -> list[Path]:
    return sorted(p.parent for p in tmp_path.glob("**/ca.key"))
