"""Where a local stack keeps its files, the port settings, and the stack file's lock.

Pure functions and one short-lived subprocess; the stacks themselves run in
tests/stack/test_stack_ports.py.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleet_agent.env.local_stack import DEFAULT_TEMPORAL_PORT, env_port, stack_paths
from fleet_agent.store import default_database_url
from runtime.connect import default_address
from starter.agent_client import CliError, resolved_address
from starter.cli import main
from starter.stack.devserver import load_dev_config
from starter.stack.guard import OwnedStack, StackRecord, claim_stack, new_record
from starter.stack.options import sim_start_epoch
from starter.stack.up import _cli_env


def test_the_default_stack_keeps_its_files_where_they_always_were(tmp_path: Path) -> None:
    assert load_dev_config().port == DEFAULT_TEMPORAL_PORT, "temporal-dev.yaml and the code agree"
    paths = stack_paths(DEFAULT_TEMPORAL_PORT, base=tmp_path)
    assert paths.store == tmp_path / "var" / "fleet-agent.db"
    assert paths.sim_state == tmp_path / "var" / "sim-state.json"
    assert paths.temporal_db == tmp_path / "var" / "temporal-dev.db"
    assert paths.stack_file == tmp_path / "var" / f"stack-{DEFAULT_TEMPORAL_PORT}.json"


def test_another_port_gets_a_folder_of_its_own(tmp_path: Path) -> None:
    default = stack_paths(DEFAULT_TEMPORAL_PORT, base=tmp_path)
    other = stack_paths(7300, base=tmp_path)
    assert other.folder == tmp_path / "var" / "stack-7300"
    assert {other.store, other.sim_state, other.temporal_db, other.stack_file}.isdisjoint(
        {default.store, default.sim_state, default.temporal_db, default.stack_file}
    )
    assert other.temporal_db == other.folder / "temporal-dev.db"


def test_a_named_database_keys_the_store_on_any_port(tmp_path: Path) -> None:
    a = stack_paths(7300, db_filename="dbs/a.db", base=tmp_path)
    a_elsewhere = stack_paths(7400, db_filename="dbs/a.db", base=tmp_path)
    b = stack_paths(7300, db_filename="dbs/b.db", base=tmp_path)
    on_default = stack_paths(DEFAULT_TEMPORAL_PORT, db_filename="dbs/a.db", base=tmp_path)
    assert a.temporal_db == (tmp_path / "dbs" / "a.db").resolve()
    assert a.store == a_elsewhere.store == on_default.store, "the same database, the same store"
    assert a.store != b.store and a.sim_state != b.sim_state
    assert a.store != stack_paths(DEFAULT_TEMPORAL_PORT, base=tmp_path).store
    # Naming the default database file is the default stack.
    named_default = stack_paths(DEFAULT_TEMPORAL_PORT, db_filename="var/temporal-dev.db")
    assert named_default.store == stack_paths(DEFAULT_TEMPORAL_PORT).store


@pytest.mark.parametrize("raw", ["abc", "0", "65536", "-1", "72.5"])
def test_a_bad_port_variable_is_named(raw: str) -> None:
    with pytest.raises(ValueError, match=rf"TEMPORAL_PORT must be a port number.*{raw!r}"):
        env_port("TEMPORAL_PORT", {"TEMPORAL_PORT": raw})


def test_port_variables_choose_the_stack_for_every_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("TEMPORAL_PORT", "TEMPORAL_ADDRESS", "FLEET_DATABASE_URL", "TEMPORAL_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    assert env_port("TEMPORAL_PORT") is None
    assert default_address() == "127.0.0.1:7233"
    assert default_database_url() == f"sqlite:///{tmp_path / 'var' / 'fleet-agent.db'}"

    monkeypatch.setenv("TEMPORAL_PORT", " 7300 ")
    assert default_address() == "127.0.0.1:7300"
    assert resolved_address(None, None) == "127.0.0.1:7300"
    assert resolved_address("h:1", None) == "h:1", "an explicit address wins"
    own = tmp_path / "var" / "stack-7300" / "fleet-agent.db"
    assert default_database_url() == f"sqlite:///{own}"
    monkeypatch.setenv("TEMPORAL_ADDRESS", "10.0.0.1:7233")
    assert resolved_address(None, None) == "10.0.0.1:7233", "TEMPORAL_ADDRESS wins over the port"

    monkeypatch.delenv("TEMPORAL_ADDRESS")
    monkeypatch.setenv("TEMPORAL_PORT", "seventy")
    with pytest.raises(CliError, match="TEMPORAL_PORT must be a port number"):
        resolved_address(None, None)


def test_the_banner_names_what_the_cli_needs_to_find_the_stack(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _cli_env("127.0.0.1:7233", stack_paths(7233).store_url, from_settings=False) == ""
    assert (
        _cli_env("127.0.0.1:7300", stack_paths(7300).store_url, from_settings=False)
        == "TEMPORAL_PORT=7300 "
    )
    # A named Temporal database keeps its store where TEMPORAL_PORT does not lead.
    named = stack_paths(7300, db_filename="other.db").store_url
    assert _cli_env("127.0.0.1:7300", named, from_settings=False) == (
        f"TEMPORAL_PORT=7300 FLEET_DATABASE_URL={named} "
    )
    # The operator's own FLEET_DATABASE_URL is not repeated (it may hold a password).
    assert _cli_env("127.0.0.1:7233", "postgresql://u:pw@h/db", from_settings=True) == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["up", "--port", "0"], "argument --port: '0' is not a port number (1-65535)"),
        (["up", "--ui-port", "http"], "argument --ui-port: 'http' is not a port number (1-65535)"),
        (["up", "--console-port", "70000"], "argument --console-port: '70000' is not a port"),
    ],
)
def test_bad_port_options_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("name", ["TEMPORAL_PORT", "TEMPORAL_UI_PORT", "CONSOLE_PORT"])
def test_bad_port_variables_stop_up_before_anything_starts(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(name, "80a")
    assert main(["up"]) == 2, "a usage error, as for the option"
    assert f"{name} must be a port number (1-65535), not '80a'" in capsys.readouterr().err
    assert not (tmp_path / "var").exists(), "nothing was started or written"


def test_one_owner_per_stack_file_and_a_dead_owner_frees_it(tmp_path: Path) -> None:
    path = tmp_path / "var" / "stack-7300.json"
    first = claim_stack(path)
    assert isinstance(first, OwnedStack)
    assert claim_stack(path) is None, "held, but no record written yet: starting"
    first.write(new_record("127.0.0.1:7300", "default", agent_id="a", task_queue="q"))
    seen = claim_stack(path)
    assert isinstance(seen, StackRecord) and seen.temporal_address == "127.0.0.1:7300"
    first.release()
    again = claim_stack(path)
    assert isinstance(again, OwnedStack), "released: the next `up` owns it"
    again.release()

    # A holder killed with SIGKILL says goodbye to no one; the kernel frees the lock.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from starter.stack.guard import claim_stack, new_record\n"
            f"c = claim_stack(Path({str(path)!r}))\n"
            "c.write(new_record('127.0.0.1:7300', 'default'))\n"
            "print('held', flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        owner = claim_stack(path)
        assert isinstance(owner, StackRecord) and owner.pid == holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=10)
    deadline = time.monotonic() + 5
    while not isinstance(claim := claim_stack(path), OwnedStack):
        assert time.monotonic() < deadline, "the lock outlived its killed holder"
        time.sleep(0.05)
    claim.release()


def test_add_worker_needs_a_running_stack(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["up", "--add-worker", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert "--add-worker adds a worker to a running stack" in err
    assert f"none of this checkout runs on port {port}: run without it" in err
    # The refused `up` let go of the stack file: the next one owns it.
    claim = claim_stack(tmp_path / "var" / f"stack-{port}.json")
    assert isinstance(claim, OwnedStack)
    claim.release()


_NOW = datetime(2026, 12, 7, 16, 50, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "at"),
    [
        ("08:00", datetime(2026, 12, 8, 8, 0, tzinfo=UTC)),  # the next one: tomorrow
        ("16:50", datetime(2026, 12, 8, 16, 50, tzinfo=UTC)),  # now is not ahead
        ("16:51", datetime(2026, 12, 7, 16, 51, tzinfo=UTC)),
        ("2099-01-15T08:00Z", datetime(2099, 1, 15, 8, 0, tzinfo=UTC)),
        ("2099-01-15T09:00+01:00", datetime(2099, 1, 15, 8, 0, tzinfo=UTC)),
    ],
)
def test_sim_start_is_the_next_time_of_day_or_a_later_date(text: str, at: datetime) -> None:
    assert sim_start_epoch(text, _NOW) == at.timestamp()


@pytest.mark.parametrize(
    "text", ["25:00", "8", "noon", "2020-01-01T00:00Z", "9999-01-01T00:00Z", "", "x" * 10_000]
)
def test_a_sim_start_in_the_past_or_not_a_time_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--sim-start: ") as exc:
        sim_start_epoch(text, _NOW)
    assert len(str(exc.value)) < 200, "the input is cut, not echoed whole"


def test_a_bad_sim_start_stops_up_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["up", "--sim-start", "yesterday"]) == 2
    assert "--sim-start: 'yesterday' is neither" in capsys.readouterr().err
    assert not (tmp_path / "var").exists(), "nothing was started or written"
