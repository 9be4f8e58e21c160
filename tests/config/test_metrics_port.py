"""Where the Prometheus metrics are served: METRICS_PORT and its spellings, a
bad or taken port named clearly, the stack's default port, and a worker whose
port is taken exits 1."""

from __future__ import annotations

import socket

import pytest

from fleet_agent.config.metrics_address import metrics_address
from fleet_agent.config.settings import Settings
from runtime.telemetry import (
    STACK_METRICS_ADDRESS,
    MetricsUnavailable,
    install_stack_metrics,
    metrics_runtime,
)
from starter.cli import main as cli_main
from tests.helpers.ports import free_port


def test_a_taken_metrics_port_is_a_clear_error() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        address = f"127.0.0.1:{held.getsockname()[1]}"
        with pytest.raises(MetricsUnavailable, match=f"cannot serve metrics on {address}"):
            metrics_runtime(address)


@pytest.mark.parametrize(
    ("env", "address"),
    [
        ({}, None),
        ({"METRICS_PORT": "off"}, None),
        ({"METRICS_PORT": "9464"}, "127.0.0.1:9464"),
        ({"METRICS_PORT": " 0.0.0.0:9100 "}, "0.0.0.0:9100"),
        ({"METRICS_PORT": "[::]:9100"}, "[::]:9100"),
        ({"FLEET_METRICS_PORT": "9200"}, "127.0.0.1:9200"),
        ({"METRICS_PORT": "9300", "FLEET_METRICS_PORT": "9200"}, "127.0.0.1:9300"),
    ],
)
def test_metrics_port_settings(env: dict[str, str], address: str | None) -> None:
    assert metrics_address(env) == address
    assert Settings.from_env(env).metrics_address == address


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"METRICS_PORT": "nine"}, "METRICS_PORT"),
        ({"METRICS_PORT": "70000"}, "METRICS_PORT"),
        ({"METRICS_PORT": "0"}, "METRICS_PORT"),
        ({"METRICS_PORT": ":9464"}, "METRICS_PORT"),
        ({"FLEET_METRICS_PORT": "host:"}, "FLEET_METRICS_PORT"),
    ],
)
def test_a_bad_metrics_port_names_the_variable(env: dict[str, str], name: str) -> None:
    with pytest.raises(ValueError, match=f"^{name} must be a port"):
        Settings.from_env(env)


def _serve(address: str) -> str:
    metrics_runtime(address)  # binds, or raises; dropped at once (the default runtime stays)
    return f"http://{address}/metrics"


def test_the_stacks_metrics_port() -> None:
    served: list[str] = []

    def record(address: str) -> str:
        served.append(address)
        return "URL"

    assert install_stack_metrics({}, record) == ("URL", "metrics:    URL")
    assert served == [STACK_METRICS_ADDRESS], "the default address when METRICS_PORT is unset"
    assert install_stack_metrics({"METRICS_PORT": "off"}, _serve) == (
        None,
        "metrics:    off (METRICS_PORT=off)",
    )
    port = free_port()
    url, line = install_stack_metrics({"METRICS_PORT": str(port)}, _serve)
    assert url == f"http://127.0.0.1:{port}/metrics" and line == f"metrics:    {url}"
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = str(held.getsockname()[1])
        with pytest.raises(MetricsUnavailable, match="set METRICS_PORT to a free port"):
            install_stack_metrics({"METRICS_PORT": taken}, _serve)
        # The default port taken (a second stack): metrics off, said plainly.

        def taken_default(address: str) -> str:
            return _serve(f"127.0.0.1:{taken}")

        url, line = install_stack_metrics({}, taken_default)
        assert url is None and line.startswith("metrics:    off: cannot serve metrics on")


def test_a_worker_whose_metrics_port_is_taken_says_so_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setenv("METRICS_PORT", str(port))
        monkeypatch.setenv("FLEET_LLM_PROVIDER", "autopilot")
        # Nothing listens on this Temporal address: metrics fail first.
        monkeypatch.setenv("TEMPORAL_ADDRESS", f"127.0.0.1:{free_port()}")
        assert cli_main(["worker"]) == 1
    err = capsys.readouterr().err
    assert f"cannot serve metrics on 127.0.0.1:{port}" in err
    monkeypatch.setenv("METRICS_PORT", "nine")
    assert cli_main(["worker"]) != 0
    assert "METRICS_PORT must be a port (1-65535), HOST:PORT, or off, not 'nine'" in (
        capsys.readouterr().err
    )
