"""`fleet-agent up` as a subprocess for a bench, and what the bench reads of it.

`start_up` runs ``fleet-agent up`` (as the console script does:
``python -c "from starter.cli import main; main()" up``) in its own folder,
on free ports, with the offline autopilot (no API keys), its store a SQLite
file of that folder, and waits for its banner: the simulator's URL, the
router's address (Curio's ``[Cuzk] Address``) and "agent started". Its
output goes to ``up.log`` in the folder. `config_set` changes the agent's
config with ``fleet-agent config --set`` (the CLI, as an operator would).
`stop_up` sends SIGTERM (``up`` stops its dev server, simulator, router and
worker) and waits.

`sim_get` and `sim_post` call the simulator's control API (docs/SIMULATOR.md:
``GET /_sim/state``, ``GET /_sim/charges``, ``POST /_sim/cuzk/{id}``);
`store_reads` reads the router's members and witness and the agent's failed
hosts from the stack's store (fleet_agent/store/router.py, hosts.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import httpx

from bench._common import ROOT
from bench.perf._chaos_stack import free_port
from fleet_agent.cuzk.witness import MemberSpec
from fleet_agent.store import FailedHosts, RouterMembers, RouterWitness, Store
from fleet_agent.store.hosts import FailedHost
from fleet_agent.store.router import WitnessRead

__all__ = [
    "StoreRead",
    "UpStack",
    "config_set",
    "sim_get",
    "sim_post",
    "start_up",
    "stop_up",
    "store_reads",
]

#: Variables of the caller's environment that would take `up` off the
#: simulator and the autopilot, or out of router mode (as tests/stack/test_cli_up.py drops them).
_DROPPED_ENV = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "FLEET_LLM_PROVIDER",
        "VAST_API_KEY",
        "VAST_API_URL",
        "FLEET_PROVER_MODE",
        "FLEET_DEMAND_SOURCE",
        "FLEET_DATABASE_URL",
        "FLEET_ROUTER_LISTEN",
    }
)
_CLI = ("-c", "from starter.cli import main; main()")


@dataclass
class UpStack:
    """A running `fleet-agent up` and where its parts are."""

    proc: asyncio.subprocess.Process
    folder: Path
    env: dict[str, str]
    temporal: str
    agent_id: str
    sim_url: str = ""
    router: str = ""
    _log: IO[str] | None = None
    _reader: asyncio.Task[None] | None = None

    @property
    def store_url(self) -> str:
        return self.env["FLEET_DATABASE_URL"]


async def start_up(
    folder: Path,
    *,
    agent_id: str,
    speed: float,
    seed: int,
    scenario: str,
    extra_args: list[str],
    extra_env: dict[str, str],
    within_s: float = 120.0,
) -> UpStack:
    """Start `fleet-agent up` in `folder` and wait (`within_s`) for "agent
    started"; raises RuntimeError (with the log's tail) if it ends first."""
    port, ui_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env |= {
        "FLEET_DATABASE_URL": f"sqlite:///{folder / 'fleet.db'}",
        "TEMPORAL_ADDRESS": f"127.0.0.1:{port}",
        "CONSOLE_PORT": str(free_port()),
        "METRICS_PORT": "off",
        "PYTHONPATH": str(ROOT),
        # grpc's C core logs every GOAWAY of a destroyed machine at INFO otherwise.
        "GRPC_VERBOSITY": "ERROR",
        **extra_env,
    }
    argv = [
        sys.executable,
        *_CLI,
        "up",
        "--port", str(port),
        "--ui-port", str(ui_port),
        "--db-filename", str(folder / "temporal.db"),
        "--agent-id", agent_id,
        "--sim-speed", str(speed),
        "--sim-seed", str(seed),
        "--sim-scenario", scenario,
        *extra_args,
    ]  # fmt: skip
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=folder,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    stack = UpStack(proc, folder, env, f"127.0.0.1:{port}", agent_id)
    stack._log = (folder / "up.log").open("w")
    started = asyncio.get_running_loop().create_future()
    stack._reader = asyncio.create_task(_read(stack, started))
    try:
        await asyncio.wait_for(started, within_s)
    except BaseException:
        await stop_up(stack)
        raise
    return stack


async def _read(stack: UpStack, started: asyncio.Future[None]) -> None:
    """Copy `up`'s output to its log; note the simulator and router addresses."""
    assert stack.proc.stdout is not None and stack._log is not None
    while line := (await stack.proc.stdout.readline()).decode(errors="replace"):
        stack._log.write(line)
        stack._log.flush()
        if m := re.search(r"simulator at (http://\S+)", line):
            stack.sim_url = m[1]
        if m := re.search(r"router at (\S+) ", line):
            stack.router = m[1]
        if line.startswith("agent started") and not started.done():
            started.set_result(None)
    if not started.done():
        tail = (stack.folder / "up.log").read_text()[-3000:]
        started.set_exception(RuntimeError(f"`fleet-agent up` ended early:\n{tail}"))


async def config_set(stack: UpStack, values: dict[str, Any]) -> str:
    """`fleet-agent config --set KEY=VALUE ...` for the stack's agent; its output."""
    sets = [arg for k, v in values.items() for arg in ("--set", f"{k}={v}")]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *_CLI,
        "config",
        "--agent-id", stack.agent_id,
        "--address", stack.temporal,
        "--timeout", "30",
        *sets,
        cwd=stack.folder,
        env=stack.env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"fleet-agent config failed: {out.decode()[-2000:]}")
    return out.decode()


async def stop_up(stack: UpStack) -> None:
    """SIGTERM, as `up` expects (it stops everything it started); SIGKILL after 60 s."""
    if stack.proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            stack.proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(stack.proc.wait(), 60)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                stack.proc.kill()
            await stack.proc.wait()
    if stack._reader is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(stack._reader, 10)
    if stack._log is not None:
        stack._log.close()


async def sim_get(client: httpx.AsyncClient, url: str, path: str) -> Any:
    """The simulator's control API: ``GET path`` (JSON)."""
    reply = await client.get(f"{url}{path}", timeout=10)
    reply.raise_for_status()
    return reply.json()


async def sim_post(client: httpx.AsyncClient, url: str, path: str, body: dict[str, Any]) -> Any:
    """The simulator's control API: ``POST path`` with `body` (JSON); raises on an error."""
    reply = await client.post(f"{url}{path}", json=body, timeout=10)
    if reply.status_code != 200:
        raise RuntimeError(f"POST {path} {body}: {reply.status_code} {reply.text[:300]}")
    return reply.json()


@dataclass(frozen=True)
class StoreRead:
    """One read of the stack's store: the router's side and the agent's bans."""

    members: list[MemberSpec]
    witness: WitnessRead
    banned: list[FailedHost]


def store_reads(store: Store, agent_id: str) -> StoreRead:
    """The members the agent wrote, the witness the router wrote, the hosts
    the agent remembers as failed (now by the wall clock: the worker's, in `up`)."""
    return StoreRead(
        members=RouterMembers(store).load(agent_id),
        witness=RouterWitness(store).load(agent_id),
        banned=FailedHosts(store).active(agent_id, datetime.now(UTC)),
    )
