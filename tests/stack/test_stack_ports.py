"""`fleet-agent up` cannot collide: real processes on free ports.

- a port held by a program that is not a Temporal server fails in seconds,
  naming the port and the variable that moves it;
- a second `up` of a running stack attaches and starts no worker or
  simulator; `--add-worker` adds exactly one worker;
- a stack on another port keeps its own Temporal database, store and
  simulator state.

Each `up` runs as the console script does, in a scratch working directory
(where the stack keeps `var/`), with the autopilot and the simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from fleet_agent.store import RunRecord, Store
from starter.agent_client import CliError
from starter.cli import main
from starter.stack import guard as stack_guard
from starter.stack.devserver import DevServerConfig
from starter.stack.temporal_server import check_ports
from tests.helpers import eventually, finished_runs
from tests.helpers.ports import free_port
from tests.helpers.stack import banner_command, start_up, up_env
from workflows.policies import TASK_QUEUE

# Generous: the measured figure is in the report (about 2 s for an HTTP
# server, 5 s plus start-up for a listener that never answers).
FAIL_FAST_BOUND = 15.0


@contextlib.contextmanager
def http_listener() -> Iterator[int]:
    """An ordinary HTTP server: not a Temporal frontend."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """A socket that accepts connections and never says a word."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


async def test_a_port_held_by_another_program_fails_fast_and_names_the_variable(
    tmp_path: Path,
) -> None:
    with http_listener() as port:
        started = time.monotonic()
        # Through the environment, as `make run TEMPORAL_PORT=…` passes it.
        up = await start_up(tmp_path, env=up_env(TEMPORAL_PORT=str(port)))
        code = await up.finish(within=30)
        took = time.monotonic() - started
    assert code == 1, up.text
    assert f"port {port} is in use by a program that is not a Temporal server" in up.text
    assert f"make run TEMPORAL_PORT={port + 100}" in up.text, up.text
    assert took < FAIL_FAST_BOUND, f"took {took:.1f}s"
    print(f"HTTP listener on the Temporal port: failed after {took:.1f}s")


async def test_a_silent_listener_and_a_taken_ui_port_fail_fast(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # In-process, the same check `up` makes first: no interpreter start-up
    # here, and a shorter wait for an answer than the 5 s `up` gives.
    monkeypatch.setattr(stack_guard, "PROBE_TIMEOUT", 1.0)
    with silent_listener() as port:
        config = DevServerConfig(port=port, ui_port=free_port())
        started = time.monotonic()
        with pytest.raises(CliError) as exc:
            await check_ports(config)
        took = time.monotonic() - started
    assert f"port {port} is in use" in str(exc.value), exc.value
    assert "set TEMPORAL_PORT" in str(exc.value) and "no answer within 1s" in str(exc.value)
    assert took < FAIL_FAST_BOUND, f"took {took:.1f}s"

    with http_listener() as ui_port:
        config = DevServerConfig(port=free_port(), ui_port=ui_port)
        with pytest.raises(CliError) as exc:
            await check_ports(config)
    assert f"port {ui_port} (the Temporal Web UI's) is in use" in str(exc.value), exc.value
    assert f"make run TEMPORAL_UI_PORT={ui_port + 100}" in str(exc.value)
    # Free ports: nothing to reuse, nothing in the way.
    assert await check_ports(DevServerConfig(port=free_port(), ui_port=free_port())) is False


async def pollers(address: str) -> set[str]:
    """Identities of the workers polling the agent's workflow task queue."""
    client = await Client.connect(address)
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=TASK_QUEUE),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return {p.identity for p in described.pollers}


async def test_a_second_up_attaches_and_the_stack_keeps_its_own_files(tmp_path: Path) -> None:
    port, ui_port = free_port(), free_port()
    ports = ["--port", str(port), "--ui-port", str(ui_port)]
    # Metrics on, explicitly, in every `up`: the ones that find a server
    # already listening probe it first, and must leave the process's Temporal
    # runtime to the metrics (it can be set only once).
    metrics = free_port()
    first = await start_up(tmp_path, *ports, env=up_env(METRICS_PORT=str(metrics)))
    try:
        await first.until("agent started")
        assert "simulator at http://127.0.0.1:" in first.text
        assert f"metrics:    http://127.0.0.1:{metrics}/metrics" in first.text, first.text
        scraped = await asyncio.to_thread(
            httpx.get, f"http://127.0.0.1:{metrics}/metrics", timeout=10
        )
        assert scraped.status_code == 200 and "temporal_" in scraped.text
        address = f"127.0.0.1:{port}"

        # A second `up` of the same stack attaches: no worker, no simulator; it
        # follows the runs, which the first stack's worker does.
        second = await start_up(tmp_path, *ports, env=up_env(METRICS_PORT=str(free_port())))
        await second.until("following the agent's runs")
        assert "already running in this checkout" in second.text, second.text
        assert "starts no worker and no simulator" in second.text
        assert "simulator at" not in second.text and "fleet-agent is up" not in second.text
        assert await asyncio.to_thread(main, ["trigger", "--address", address]) == 0
        await second.until(" ok · ")  # "run #N ok · …", printed as the run ends
        attached_run = re.search(r"^run #(\d+) ok", second.text, re.MULTILINE)
        assert attached_run, second.text
        assert await second.finish(signal.SIGINT) == 0, second.text
        assert "detached; the stack keeps running" in second.text
        assert len(await pollers(address)) == 1, "one worker: the first stack's"

        # Asked explicitly, a second `up` adds one worker, and nothing else.
        added = await start_up(
            tmp_path, *ports, "--add-worker", env=up_env(METRICS_PORT=str(free_port()))
        )
        await added.until("worker added to the running stack")
        await eventually(
            lambda: _has_pollers(address, 2),
            timeout=20,
            interval=0.5,
            what="2 pollers",
        )
        assert await added.finish(signal.SIGINT) == 0, added.text
        assert "simulator at" not in added.text

        assert first.proc.returncode is None, "the first stack still runs"
    finally:
        code = await first.finish(signal.SIGINT)
    assert code == 0, first.text[-3000:]
    # A stack on another port keeps its own Temporal database, store and
    # simulator state (their paths are disjoint: tests/stack/test_local_stack.py).
    own = tmp_path / "var" / f"stack-{port}"
    runs = [r.run for r in _runs(own / "fleet-agent.db")]
    assert int(attached_run.group(1)) in runs, runs
    assert (own / "temporal-dev.db").exists() and (own / "sim-state.json").exists()
    assert not (tmp_path / "var" / "fleet-agent.db").exists(), "the default stack's store"


def _runs(path: Path) -> list[RunRecord]:
    store = Store(f"sqlite:///{path}")
    try:
        return finished_runs(store, "fleet-agent")
    finally:
        store.dispose()


async def _has_pollers(address: str, count: int) -> bool:
    return len(await pollers(address)) >= count


async def test_the_commands_up_prints_for_another_port_reach_its_run_log(tmp_path: Path) -> None:
    # As `make run TEMPORAL_PORT=P` starts it: the port through the environment.
    port = free_port()
    env = up_env(TEMPORAL_PORT=str(port), TEMPORAL_UI_PORT=str(free_port()))
    up = await start_up(tmp_path, env=env)
    try:
        await up.until("agent started")
        # The operator's shell: none of the stack's settings but what the line sets.
        for verb in ("ask", "runs", "fleet"):
            argv, assigned = banner_command(up.text, verb)
            assert assigned == {"TEMPORAL_PORT": str(port)}, assigned
            done = await asyncio.to_thread(
                subprocess.run,
                argv,
                cwd=tmp_path,
                env=up_env() | assigned,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, (verb, done.stdout, done.stderr)
            if verb == "ask":
                assert re.search(r"^run #\d+ answered:", done.stdout, re.MULTILINE), done.stdout
            elif verb == "runs":
                assert "no runs yet" not in done.stdout and "#1" in done.stdout, done.stdout
        # Last: the watchdog's line names how to stop the agent for good.
        argv, assigned = banner_command(up.text, "cancel")
        assert assigned == {"TEMPORAL_PORT": str(port)}, assigned
        done = await asyncio.to_thread(
            subprocess.run,
            [*argv, "--yes"],
            cwd=tmp_path,
            env=up_env() | assigned,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "nothing restarts it" in done.stdout, done.stdout
    finally:
        code = await up.finish(signal.SIGINT)
    assert code == 0, up.text[-3000:]
