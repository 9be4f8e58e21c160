"""Serving the console: `fleet-agent console`'s options and port, and the
console inside another program's event loop (`fleet-agent up`, the tests)."""

from __future__ import annotations

import contextlib
import os
import socket

import httpx
import pytest
from temporalio.client import Client

from fleet_agent.store import Store
from starter.agent_client import AgentClient, CliError
from starter.cli import main
from starter.console import ConsoleSettings, console_for_stack, running_console
from tests.helpers.console_seed import AGENT, UI, seed


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (
            ["console", "--port", "http"],
            {},
            "--port: 'http' is not a port number (1-65535)",
        ),
        (["console", "--port", "70000"], {}, "argument --port: '70000' is not a port number"),
        (["console"], {"CONSOLE_PORT": "x"}, "argument --port: 'x' is not a port number"),
    ],
)
def test_console_usage_errors_exit_2(
    argv: list[str],
    env: dict[str, str],
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_console_on_a_taken_port_fails_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["console", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"cannot serve the console on 127.0.0.1:{port}" in err and "CONSOLE_PORT" in err


async def test_the_console_runs_inside_another_programs_loop_and_stops() -> None:
    agent = AgentClient(dev_null_client, AGENT)
    async with (
        running_console(agent, ConsoleSettings()) as url,
        httpx.AsyncClient() as http,
    ):
        served = await http.get(url + "/static/htmx.min.js")
        assert served.status_code == 200 and "htmx" in served.text
    async with httpx.AsyncClient() as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(url + "/")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(CliError, match=f"cannot serve the console on 127.0.0.1:{port}"):
            async with running_console(agent, ConsoleSettings(), port=port):
                pass


async def test_the_stacks_console_reads_the_stacks_store(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(store)
    monkeypatch.setenv("FLEET_DATABASE_URL", "sqlite:////nowhere/else.db")
    agent = AgentClient(dev_null_client, AGENT)
    async with contextlib.AsyncExitStack() as exits:
        url = await console_for_stack(
            exits, agent, ui_url=UI, namespace="default", port=0, store_url=str(store.engine.url)
        )
        async with httpx.AsyncClient() as http:
            runs = await http.get(url + "/runs")
        assert runs.status_code == 200 and runs.text.count('class="run ') == 3
    assert os.environ["FLEET_DATABASE_URL"] == str(store.engine.url)


async def dev_null_client() -> Client:
    raise AssertionError("serving static files must not connect to Temporal")
