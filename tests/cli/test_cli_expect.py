"""`fleet-agent expect`: known demand events from the command line.

The parsing on its own (no server: a wrong command line fails before
connecting), then the command against the real dev server
(tests/helpers/cli.py): add, the same again, --list, --clear.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta

import pytest

from starter.agent_client import UsageError
from starter.cli.expect import event_from_args, parse_multiplier, parse_window
from tests.helpers.cli import Stack, agent_cli, assert_one_line_error, cli, env, new_agent, sim
from tests.helpers.cli import stack as stack

__all__ = ["env", "sim", "stack"]  # the fixtures, imported for pytest

NOW = datetime(2026, 12, 6, 15, 0, tzinfo=UTC)


@pytest.mark.parametrize("text", ["3x", "x3", "3×", "3", " 3X "])
def test_multipliers(text: str) -> None:
    assert parse_multiplier(text) == 3.0


@pytest.mark.parametrize("text", ["0x", "101x", "three", "3xx", "-3x", "", "1e3"])
def test_bad_multipliers(text: str) -> None:
    with pytest.raises(UsageError, match="expected a multiplier"):
        parse_multiplier(text)


def test_windows_default_to_today_then_tomorrow_and_cross_midnight() -> None:
    today = NOW.replace(hour=0)
    assert parse_window("16:00-18:00", None, NOW) == (
        today + timedelta(hours=16),
        today + timedelta(hours=18),
    )
    # Under way: still today.
    assert parse_window("14:00-16:00", None, NOW)[0] == today + timedelta(hours=14)
    # Over by now: tomorrow.
    assert parse_window("9:00-10:30", None, NOW) == (
        today + timedelta(days=1, hours=9),
        today + timedelta(days=1, hours=10.5),
    )
    # Ends before it starts: it ends the next day.
    assert parse_window("22:00-02:00", None, NOW) == (
        today + timedelta(hours=22),
        today + timedelta(days=1, hours=2),
    )
    on = parse_window("14:00-16:00", date(2026, 12, 24), NOW)
    assert on[0] == datetime(2026, 12, 24, 14, tzinfo=UTC)


@pytest.mark.parametrize(
    ("window", "day", "message"),
    [
        ("14-16", None, "HH:MM-HH:MM"),
        ("24:00-25:00", None, "HH:MM-HH:MM"),
        ("14:00-16:60", None, "HH:MM-HH:MM"),
        ("09:00-10:00", date(2026, 12, 6), "ended already"),
    ],
)
def test_bad_windows(window: str, day: date | None, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_window(window, day, NOW)


def test_event_from_args() -> None:
    event = event_from_args("3x", "16:00-18:00", "2026-12-07", "launch", NOW)
    assert event.describe() == "x3 16:00-18:00 UTC 2026-12-07 (launch)"
    with pytest.raises(UsageError, match="YYYY-MM-DD"):
        event_from_args("3x", "16:00-18:00", "7/12/2026", None, NOW)
    with pytest.raises(UsageError, match="note"):
        event_from_args("3x", "16:00-18:00", None, "n" * 201, NOW)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["expect"], "give a multiplier and a UTC window"),
        (["expect", "3x"], "give a multiplier and a UTC window"),
        (["expect", "3x", "14:00"], "HH:MM-HH:MM"),
        (["expect", "500x", "14:00-16:00"], "at most 100"),
        (["expect", "--list", "--clear"], "one of them"),
        (["expect", "3x", "14:00-16:00", "--list"], "one of them"),
        (["expect", "3x", "14:00-16:00", "--date", "tomorrow"], "YYYY-MM-DD"),
    ],
)
async def test_a_wrong_command_line_is_one_line_before_connecting(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    # No server at this address: the error comes before any connection.
    result = await cli(capsys, *argv, "--address", "127.0.0.1:1")
    assert_one_line_error(result, fragment, code=2)


@pytest.mark.devserver
async def test_expect_adds_lists_and_clears(env: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    agent = new_agent(env)
    assert (await agent_cli(capsys, env, "start", "--paused", "--agent-id", agent)).code == 0
    day = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    args = ("expect", "3x", "14:00-16:00", "--date", day, "--note", "launch", "--agent-id", agent)

    added = await agent_cli(capsys, env, *args)
    assert added.code == 0, added
    lines = added.out.splitlines()
    assert lines[0] == f"recorded: x3 14:00-16:00 UTC {day} (launch); 1 known event(s)"
    assert "events act only in demand mode" in lines[1]

    again = await agent_cli(capsys, env, *args)
    assert again.code == 0 and again.out.startswith("already known: x3"), again

    night = await agent_cli(
        capsys, env, "expect", "x1.5", "22:00-02:00", "--date", day, "--agent-id", agent
    )
    assert night.code == 0 and "2 known event(s)" in night.out, night

    listed = await agent_cli(capsys, env, "expect", "--list", "--agent-id", agent)
    assert listed.code == 0, listed
    rows = listed.out.splitlines()
    assert rows[0] == f"ahead  x3 14:00-16:00 UTC {day} (launch)"
    assert rows[1] == f"ahead  x1.5 22:00-02:00 UTC {day}"

    as_json = await agent_cli(capsys, env, "expect", "--list", "--json", "--agent-id", agent)
    events = json.loads(as_json.out)
    assert [(e["multiplier"], e["note"]) for e in events] == [(3.0, "launch"), (1.5, "")]
    config = await agent_cli(capsys, env, "config", "--json", "--agent-id", agent)
    assert len(json.loads(config.out)["demand_events"]) == 2

    cleared = await agent_cli(capsys, env, "expect", "--clear", "--agent-id", agent)
    assert cleared.code == 0 and cleared.out.strip() == "cleared 2 known demand event(s)"
    empty = await agent_cli(capsys, env, "expect", "--list", "--agent-id", agent)
    assert empty.out.splitlines()[0] == "no known demand events"
