"""Settings from the environment and a .env file (fleet_agent/env/env_file.py,
fleet_agent/env/env_settings.py): every bad value is one line naming its variable,
the file is read, and the environment wins over it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fleet_agent.config.settings import Settings
from fleet_agent.config.tuning import WorkerTuning
from fleet_agent.env.env_file import ENV_FILE_ENV, SettingsError, env_file_path, export_env_file
from starter.cli import main as cli_main
from tests.helpers.worker_process import worker_stops

ROOT = Path(__file__).resolve().parents[2]
ANTHROPIC = {"ANTHROPIC_API_KEY": "sk-test"}
# The key travels in every request: plain http only to this machine.
PLAIN_HTTP = "VAST_API_URL must be https unless it points at this machine"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FLEET_PROVER_DISK_GB": "abc"}, "FLEET_PROVER_DISK_GB must be a number, not 'abc'"),
        ({"FLEET_PROVER_DISK_GB": "4"}, "FLEET_PROVER_DISK_GB must be >= 8, not 4.0"),
        ({"FLEET_PROVER_DISK_GB": "inf"}, "FLEET_PROVER_DISK_GB must be a number, not 'inf'"),
        ({"FLEET_PROVER_IMAGE_GB": "big"}, "FLEET_PROVER_IMAGE_GB must be a number, not 'big'"),
        ({"FLEET_PROVER_IMAGE_GB": "0"}, "FLEET_PROVER_IMAGE_GB must be > 0, not 0.0"),
        ({"FLEET_PROVER_STATUS_PORT": "x"}, "FLEET_PROVER_STATUS_PORT must be a port (1-65535)"),
        ({"FLEET_PROVER_STATUS_PORT": "0"}, "FLEET_PROVER_STATUS_PORT must be a port (1-65535)"),
        ({"FLEET_PROVER_STATUS_PORT": "70000"}, "FLEET_PROVER_STATUS_PORT must be a port"),
        ({"FLEET_PROVER_RUNTYPE": "bash"}, "FLEET_PROVER_RUNTYPE: runtype must be one of"),
        ({"FLEET_PROVER_RUNTYPE": "ssh"}, "FLEET_PROVER_RUNTYPE: runtype 'ssh' replaces"),
        (
            {"FLEET_LLM_PROVIDER": "openai"},
            "FLEET_LLM_PROVIDER must be 'anthropic' or 'autopilot', not 'openai'",
        ),
        ({"FLEET_NEW_STORE": "maybe"}, "FLEET_NEW_STORE must be 1 or 0"),
        ({"FLEET_PROVER_ALLOW_LOOPBACK": "sim"}, "FLEET_PROVER_ALLOW_LOOPBACK must be 1 or 0"),
        ({"FLEET_SEARCH_ATTRIBUTES": "yes"}, "FLEET_SEARCH_ATTRIBUTES must be auto, on or off"),
        ({"METRICS_PORT": "nine"}, "METRICS_PORT must be a port"),
        ({"FLEET_METRICS_PORT": "0"}, "FLEET_METRICS_PORT must be a port"),
        ({"FLEET_LLM_PRICES": "{nope"}, "FLEET_LLM_PRICES is not valid JSON"),
        ({**ANTHROPIC, "FLEET_LLM_MODEL": "claude-nope"}, "FLEET_LLM_MODEL 'claude-nope' is not"),
        ({"VAST_API_URL": "http://console.vast.ai"}, PLAIN_HTTP),
        ({"VAST_API_URL": "http://10.0.0.5:8080/"}, PLAIN_HTTP),
        ({"VAST_API_URL": "http://localhost.evil.example"}, PLAIN_HTTP),
        ({"VAST_API_URL": "ftp://console.vast.ai"}, "VAST_API_URL must be http(s)://host[:port]"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError) as err:
        Settings.from_env(env)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FLEET_WORKER_ACTIVITIES": "many"}, "FLEET_WORKER_ACTIVITIES must be a whole number"),
        ({"FLEET_WORKER_ACTIVITIES": "2.5"}, "FLEET_WORKER_ACTIVITIES must be a whole number"),
        ({"FLEET_WORKER_WORKFLOW_TASKS": "0"}, "FLEET_WORKER_WORKFLOW_TASKS must be >= 1, not '0'"),
        ({"FLEET_WORKER_CACHED_WORKFLOWS": "-5"}, "FLEET_WORKER_CACHED_WORKFLOWS must be >= 1"),
        ({"FLEET_WORKER_WORKFLOW_POLLERS": "x"}, "FLEET_WORKER_WORKFLOW_POLLERS must be a whole"),
        ({"FLEET_WORKER_ACTIVITY_POLLERS": "0"}, "FLEET_WORKER_ACTIVITY_POLLERS must be >= 1"),
        ({"FLEET_VAST_LIST_TTL_S": "soon"}, "FLEET_VAST_LIST_TTL_S must be a number, not 'soon'"),
        ({"FLEET_VAST_LIST_TTL_S": "-1"}, "FLEET_VAST_LIST_TTL_S must be >= 0, not '-1'"),
        ({"FLEET_VAST_LIST_TTL_S": "nan"}, "FLEET_VAST_LIST_TTL_S must be a number"),
        ({"FLEET_VAST_LIST_STALE_S": "old"}, "FLEET_VAST_LIST_STALE_S must be a number"),
        ({"FLEET_VAST_LIST_STALE_S": "-3"}, "FLEET_VAST_LIST_STALE_S must be >= 0, not '-3'"),
    ],
)
def test_a_bad_tuning_is_one_line_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as err:
        WorkerTuning.from_env(env)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_empty_and_unknown_values_behave_as_before() -> None:
    blank = dict.fromkeys(
        (
            "ANTHROPIC_API_KEY",
            "FLEET_LLM_PROVIDER",
            "FLEET_LLM_MODEL",
            "FLEET_LLM_PRICES",
            "FLEET_DATABASE_URL",
            "FLEET_NEW_STORE",
            "VAST_API_URL",
            "VAST_API_KEY",
            "FLEET_PROVER_DISK_GB",
            "FLEET_PROVER_STATUS_PORT",
            "FLEET_PROVER_ALLOW_LOOPBACK",
            "METRICS_PORT",
            "FLEET_SEARCH_ATTRIBUTES",
        ),
        "",
    )
    assert Settings.from_env(blank) == Settings.from_env({}) == Settings()
    # Variables of no model (a shared environment, a shared .env) are ignored.
    assert Settings.from_env({"FLEET_SOMETHING_ELSE": "x", "PATH": "/bin"}) == Settings()
    assert WorkerTuning.from_env({"FLEET_WORKER_ACTIVITIES": " "}) == WorkerTuning()
    assert (
        WorkerTuning.from_env({"FLEET_WORKER_ACTIVITIES": " 80 "}).max_concurrent_activities == 80
    )
    # Trailing slashes, `none` in any case, a key set: as before.
    settings = Settings.from_env(
        {"VAST_API_URL": "http://127.0.0.1:9/", "FLEET_PROVER_STATUS_PORT": "None", **ANTHROPIC}
    )
    assert settings.vast_api_url == "http://127.0.0.1:9" and settings.prover.status_port is None
    assert settings.llm_provider == "anthropic"
    # The start command is a script: its spaces are kept.
    onstart = Settings.from_env(
        {"FLEET_PROVER_RUNTYPE": "ssh", "FLEET_PROVER_ONSTART": "  /start\n"}
    ).prover.onstart
    assert onstart == "  /start\n"


@pytest.mark.parametrize(
    "url",
    [
        "https://console.vast.ai",
        "http://127.0.0.1:8080",
        "http://127.7.0.9",
        "http://[::1]:9",
        "http://localhost:3000",
        "http://LocalHost",
    ],
)
def test_vast_api_url_is_https_or_this_machine(url: str) -> None:
    assert Settings.from_env({"VAST_API_URL": url + "/"}).vast_api_url == url


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No setting of ours in the environment; the working directory is tmp_path."""
    for name in list(os.environ):
        if name.startswith(("FLEET_", "VAST_", "ANTHROPIC_", "METRICS_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


DOTENV = """\
# the worker's settings
FLEET_PROVER_DISK_GB=100
FLEET_PROVER_IMAGE_GB=20.5
VAST_API_KEY='vast-secret'
FLEET_WORKER_ACTIVITIES=80
export FLEET_SEARCH_ATTRIBUTES=off
TEMPORAL_ADDRESS=example:7233
"""


def test_the_env_file_is_read_and_the_environment_wins(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = clean_env / "fleet.env"
    path.write_text(DOTENV)
    settings = Settings.from_env(env_file=path)
    assert settings.prover.disk_gb == 100 and settings.search_attributes == "off"
    assert settings.prover.image_gb == 20.5
    assert settings.vast_api_key is not None
    assert settings.vast_api_key.get_secret_value() == "vast-secret"
    assert "vast-secret" not in repr(settings) and "vast-secret" not in str(settings)
    assert WorkerTuning.from_env(env_file=path).max_concurrent_activities == 80

    monkeypatch.setenv("FLEET_PROVER_DISK_GB", "200")
    monkeypatch.setenv("FLEET_WORKER_ACTIVITIES", "90")
    assert Settings.from_env(env_file=path).prover.disk_gb == 200
    assert WorkerTuning.from_env(env_file=path).max_concurrent_activities == 90
    # Empty in the environment is set, to the default: the file does not show through.
    monkeypatch.setenv("FLEET_PROVER_DISK_GB", "")
    assert Settings.from_env(env_file=path).prover.disk_gb == 64


def test_which_env_file(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert env_file_path() is None, "no FLEET_ENV_FILE, no ./.env"
    assert Settings.from_env().prover.disk_gb == 64
    (clean_env / ".env").write_text("FLEET_PROVER_DISK_GB=80\n")
    assert env_file_path() == Path(".env")
    assert Settings.from_env().prover.disk_gb == 80
    (clean_env / "other.env").write_text("FLEET_PROVER_DISK_GB=90\n")
    monkeypatch.setenv(ENV_FILE_ENV, str(clean_env / "other.env"))
    assert Settings.from_env().prover.disk_gb == 90
    monkeypatch.setenv(ENV_FILE_ENV, os.devnull)
    assert Settings.from_env().prover.disk_gb == 64
    monkeypatch.setenv(ENV_FILE_ENV, str(clean_env / "typo.env"))
    with pytest.raises(SettingsError, match=f"^{ENV_FILE_ENV} must name an existing file"):
        Settings.from_env()


def test_a_bad_value_in_the_env_file_names_the_variable(clean_env: Path) -> None:
    (clean_env / ".env").write_text("FLEET_PROVER_DISK_GB=abc\nFLEET_VAST_LIST_TTL_S=soon\n")
    with pytest.raises(ValueError, match=r"^FLEET_PROVER_DISK_GB must be a number, not 'abc'$"):
        Settings.from_env()
    with pytest.raises(ValueError, match=r"^FLEET_VAST_LIST_TTL_S must be a number"):
        WorkerTuning.from_env()


def test_export_env_file_keeps_what_the_environment_has(clean_env: Path) -> None:
    (clean_env / ".env").write_text(DOTENV)
    environ = {"FLEET_PROVER_DISK_GB": "200", "FLEET_WORKER_ACTIVITIES": ""}
    assert export_env_file(environ) == Path(".env")
    assert environ == {
        "FLEET_PROVER_DISK_GB": "200",
        "FLEET_WORKER_ACTIVITIES": "",
        "FLEET_PROVER_IMAGE_GB": "20.5",
        "VAST_API_KEY": "vast-secret",
        "FLEET_SEARCH_ATTRIBUTES": "off",
        # Every variable of the file: the SDK's TEMPORAL_* read the environment.
        "TEMPORAL_ADDRESS": "example:7233",
    }
    assert export_env_file({ENV_FILE_ENV: os.devnull}) == Path(os.devnull)


def test_fleet_agent_names_a_missing_env_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    where = "/nowhere/fleet.env"
    monkeypatch.setenv(ENV_FILE_ENV, where)
    assert cli_main(["runs"]) == 1
    err = capsys.readouterr().err
    assert err == f"fleet-agent: error: {ENV_FILE_ENV} must name an existing file, not {where!r}\n"


async def test_the_worker_and_the_cli_refuse_a_plain_http_vast_url_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "http://vast.example"
    message = f"{PLAIN_HTTP} (127.0.0.0/8, ::1, localhost), not {url!r}: plain http"
    code, err = await worker_stops(tmp_path, VAST_API_URL=url, VAST_API_KEY="k")
    assert code == 1 and err.startswith(f"worker: error: {message}"), err
    assert err.count("\n") == 1, "one line, no traceback"
    monkeypatch.setenv("VAST_API_URL", url)
    assert cli_main(["worker", "--address", "127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"fleet-agent: error: {message}") and err.count("\n") == 1, err


async def test_the_worker_stops_on_a_bad_value_in_its_env_file(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("FLEET_PROVER_DISK_GB=abc\n")
    # It stops before it tries Temporal.
    code, err = await worker_stops(tmp_path)
    assert code == 1
    assert err == "worker: error: FLEET_PROVER_DISK_GB must be a number, not 'abc'\n"


async def test_the_worker_says_in_one_line_that_temporal_is_unreachable(tmp_path: Path) -> None:
    """`python worker.py` with nothing at TEMPORAL_ADDRESS: one line naming the
    address and the OS's reason, exit 1, no traceback (`fleet-agent worker`
    says the same)."""
    code, err = await worker_stops(
        tmp_path, FLEET_DATABASE_URL=f"sqlite:///{tmp_path / 'store.db'}"
    )
    assert code == 1
    assert err == "worker: error: cannot reach Temporal at 127.0.0.1:9: Connection refused\n"
    assert not (tmp_path / "store.db").exists(), "no store is opened before Temporal answers"


@pytest.mark.parametrize("command", [["worker", "--address", "127.0.0.1:9"], ["up", "--check"]])
@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("FLEET_WORKER_ACTIVITIES", "0", "FLEET_WORKER_ACTIVITIES must be >= 1, not '0'"),
        ("FLEET_PROVER_DISK_GB", "abc", "FLEET_PROVER_DISK_GB must be a number, not 'abc'"),
    ],
)
def test_the_worker_and_the_stack_stop_with_one_line(
    command: list[str],
    name: str,
    value: str,
    message: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`fleet-agent worker` and `fleet-agent up` (= `make run`): before
    anything starts or connects (nothing listens on port 9)."""
    monkeypatch.setenv(name, value)
    monkeypatch.setenv("TEMPORAL_PORT", "9")
    assert cli_main(command) == 1
    assert capsys.readouterr().err == f"fleet-agent: error: {message}\n"


def test_the_cli_loads_pydantic_settings_only_for_a_command_that_reads_settings() -> None:
    """Reading commands (`runs`, `status` …) only export the file: python-dotenv."""
    code = "import sys, starter.cli; print('pydantic_settings' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
