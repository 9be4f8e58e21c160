"""The CLI's exit codes (docs/operations/talk.md), pipes whose reader went away,
and `--agent ID` on every agent command. No Temporal server: usage errors
are found before connecting, and the run log is a local SQLite file.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet_agent.models import Trigger, TriggerKind
from fleet_agent.store import Store
from starter.cli import EXIT_BROKEN_PIPE, build_parser, main
from starter.hints import CLI, TEMPORAL
from tests.helpers import finish_ok

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
NOWHERE = ("--address", "127.0.0.1:1", "--connect-timeout", "1")
# Commands that are not about one agent.
# `router` takes the router's own options (its --agent-id names whose members it serves).
NO_AGENT = {"worker", "sim", "router"}


@pytest.fixture
def run_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A run log with a few finished runs of agent `pipe`; FLEET_DATABASE_URL points at it."""
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store = Store(url)
    store.create_all()
    for run in range(1, 4):
        trigger = Trigger(
            seq=run, kind=TriggerKind.HUMAN_MESSAGE, received_at=T0, text="hi", author="op"
        )
        store.run_writes.begin_run("pipe", run, 1, [trigger], "block", T0 + timedelta(minutes=run))
        finish_ok(store, "pipe", run, T0 + timedelta(minutes=run, seconds=30), final_text="ok")
    store.dispose()
    monkeypatch.setenv("FLEET_DATABASE_URL", url)
    return url


def _into_closed_pipe(*argv: str) -> subprocess.CompletedProcess[str]:
    """The console script with stdout on a pipe whose reader is already gone
    (`| head` that has exited): every write fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-c", "from starter.cli import main; main()", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env=os.environ | {"PYTHONPATH": str(ROOT)},
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "--agent", "pipe"],
        ["show-run", "2", "--agent", "pipe"],
    ],
)
def test_a_reader_that_went_away_ends_the_command_quietly(run_log: str, argv: list[str]) -> None:
    done = _into_closed_pipe(*argv)
    assert done.returncode == EXIT_BROKEN_PIPE == 141, done
    assert done.stderr == "", done.stderr


def test_the_same_commands_print_everything_without_a_pipe(
    run_log: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runs", "--agent", "pipe"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [line.split()[0] for line in rows] == ["#1", "#2", "#3"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["config", "--set", "garbage"], "expected key=value, got 'garbage'"),
        (["config", "--set", "heartbeat_seconds=5"], "heartbeat_seconds"),
        (["config", "--set", "nonsense=1"], "nonsense"),
        (["start", "--set", "paused"], "expected key=value"),
        (["say", "  "], "text must not be blank"),
        (["say", "hi", "--json"], "--json prints the answer: use it with --wait"),
        (["ask", "hi", "--timeout", "0"], "--timeout must be more than 0 and at most 1800"),
        (["ask", "hi", "--timeout", "3600"], "--timeout must be more than 0 and at most 1800"),
        (["trigger", "--reason", "x" * 3000], "invalid trigger"),
    ],
)
def test_a_wrong_command_line_exits_2_before_connecting(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, *NOWHERE]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fleet-agent: error: ") and message in err, err
    assert "cannot reach Temporal" not in err


def test_an_unknown_simulator_scenario_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sim", "--port", "1", "--scenario", "bogus"]) == 2
    assert "unknown scenario 'bogus'; choose from" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["nonsense"],
        ["cancel-wake"],
        ["runs", "--limit", "x"],
        ["status", "--agent"],
        # Free text is not an identity: a decision is recorded as user@host.
        ["ask", "hi", "--author", "alice"],
        ["approve", "a1-1", "--author", "alice"],
        ["freeze", "--author", "alice"],
    ],
)
def test_argparse_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as usage:
        main(argv)
    assert usage.value.code == 2
    assert "usage: fleet-agent" in capsys.readouterr().err


def test_an_unreachable_service_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--agent", "x", *NOWHERE]) == 1
    assert "cannot reach Temporal at 127.0.0.1:1" in capsys.readouterr().err


def test_ctrl_c_exits_130_without_a_traceback(
    run_log: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("starter.cli.store_commands.read_runs", interrupted)
    assert main(["runs", "--agent", "pipe"]) == 130
    assert capsys.readouterr().err == ""


def test_a_missing_run_exits_1(run_log: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show-run", "9", "--agent", "pipe"]) == 1
    assert "agent 'pipe' has no run 9" in capsys.readouterr().err


def test_fleet_without_a_store_or_its_table_exits_1(
    run_log: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A store the previous version made: no fleet table until a new worker starts.
    store = Store(run_log)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE fa_fleet_snapshots")
    store.dispose()
    assert main(["fleet", "--agent", "pipe"]) == 1
    err = capsys.readouterr().err
    assert "cannot read the fleet" in err and "adds the fleet table when it starts" in err

    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{tmp_path / 'absent.db'}")
    assert main(["fleet"]) == 1
    assert "no run log at" in capsys.readouterr().err


def test_hinted_commands_exist_in_the_checkout() -> None:
    """Hints spell `.venv/bin/...`, relative to the checkout `make run` installs into."""
    for command in (CLI, TEMPORAL):
        assert os.access(ROOT / command, os.X_OK), command


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_agent_command_takes_agent_and_agent_id(monkeypatch: pytest.MonkeyPatch) -> None:
    commands = _subcommands()
    assert {"fleet", "ask", "say", "status", "runs", "show-run", "up"} <= set(commands)
    for name, parser in commands.items():
        options = {s for a in parser._actions for s in a.option_strings if a.dest == "agent_id"}
        assert options == (set() if name in NO_AGENT else {"--agent", "--agent-id"}), name

    parser = build_parser()
    assert parser.parse_args(["status", "--agent", "a1"]).agent_id == "a1"
    assert parser.parse_args(["runs", "--agent-id", "a2"]).agent_id == "a2"
    monkeypatch.setenv("FLEET_AGENT_ID", "from-env")
    assert build_parser().parse_args(["wakes"]).agent_id == "from-env"
    assert build_parser().parse_args(["wakes", "--agent", "a3"]).agent_id == "a3"
