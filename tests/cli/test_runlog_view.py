"""`fleet-agent runs` and `show-run` on a store with replayed runs, and on stores it cannot read.

In-process CLI on a SQLite store the test writes; no Temporal needed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from fleet_agent.models import RunStatus, TokenUsage, Trigger, TriggerKind
from fleet_agent.store import SCHEMA_VERSION, Store
from starter.cli import main

AGENT = "view-agent"
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _run(store: Store, run: int, workflow_run_id: str, text_: str, status: RunStatus) -> None:
    trigger = Trigger(
        seq=run, kind=TriggerKind.HUMAN_MESSAGE, received_at=T0, text=text_, author="op"
    )
    started = T0 + timedelta(minutes=run, seconds=len(workflow_run_id))
    store.run_writes.begin_run(
        AGENT, run, 1, [trigger], f"Message: {text_}", started, workflow_run_id
    )
    if status is RunStatus.RUNNING:
        return
    store.run_writes.finish_run(
        AGENT,
        run,
        status=status,
        verdict=None,
        verdict_error="",
        noop=False,
        in_prompt=True,
        error="" if status is RunStatus.OK else "the replay failed",
        final_text=f"answer to {text_}",
        actions_digest="",
        mutating_calls=0,
        tool_calls=0,
        rounds=1,
        usage=TokenUsage(input_tokens=5, output_tokens=7),
        llm_seconds=0.2,
        ended_at=started + timedelta(seconds=3),
        workflow_run_id=workflow_run_id,
    )


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    monkeypatch.setenv("FLEET_DATABASE_URL", url)
    store = Store(url)
    store.create_all()
    yield store
    store.dispose()


@pytest.fixture
def replayed(db: Store) -> Store:
    _run(db, 11, "wf-11", "hello", RunStatus.OK)
    _run(db, 12, "wf-12", "rent one", RunStatus.OK)
    _run(db, 12, "wf-12-reset", "rent one", RunStatus.FAILED)  # after a reset
    _run(db, 13, "wf-13", "still there?", RunStatus.RUNNING)
    return db


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([*argv, "--agent-id", AGENT])
    out, err = capsys.readouterr()
    return code, out, err


def test_runs_shows_every_attempt_oldest_first(
    replayed: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "runs")
    assert code == 0
    rows = [line.split("  ")[0].strip() for line in out.splitlines()[1:]]
    assert rows == ["#11", "#12", "#12 replay 2", "#13"]
    replay_row = next(line for line in out.splitlines() if line.startswith("#12 replay 2"))
    assert "failed" in replay_row and "error: the replay failed" in replay_row

    code, out, _ = _cli(capsys, "runs", "--json")
    assert [(r["run"], r["attempt"], r["workflow_run_id"]) for r in json.loads(out)] == [
        (11, 1, "wf-11"),
        (12, 1, "wf-12"),
        (12, 2, "wf-12-reset"),
        (13, 1, "wf-13"),
    ]


def test_show_run_shows_the_latest_attempt_and_lists_the_others(
    replayed: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "show-run", "12")
    assert code == 0
    head = out.splitlines()
    assert head[0].startswith(f"run #12 replay 2 of {AGENT} · session 1 · failed")
    attempts = next(line for line in head if line.strip().startswith("attempts:"))
    assert "1 ok" in attempts and "2 failed" in attempts and "(shown)" in attempts
    assert attempts.index("(shown)") > attempts.index("2 failed")

    code, out, _ = _cli(capsys, "show-run", "12", "--attempt", "1")
    assert code == 0
    assert out.splitlines()[0].startswith(f"run #12 of {AGENT} · session 1 · ok")

    code, out, _ = _cli(capsys, "show-run", "11")
    assert code == 0 and "attempts:" not in out  # a run executed once says nothing of it

    code, out, _ = _cli(capsys, "show-run", "12", "--json")
    data = json.loads(out)
    assert data["run"]["attempt"] == 2
    assert [a["attempt"] for a in data["attempts"]] == [1, 2]


def test_show_run_of_a_missing_attempt_is_an_error(
    replayed: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _cli(capsys, "show-run", "12", "--attempt", "3")
    assert code == 1
    assert "run 12 of agent 'view-agent' has no attempt 3 (attempts: 1, 2)" in err
    code, _, err = _cli(capsys, "show-run", "99")
    assert code == 1 and "has no run 99" in err


def test_a_store_of_another_schema_version_is_refused_with_advice(
    db: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE fa_meta SET value = :v"), {"v": str(SCHEMA_VERSION + 1)})
    code, _, err = _cli(capsys, "runs")
    assert code == 1 and f"schema version {SCHEMA_VERSION + 1}" in err
    assert "upgrade fleet-agent" in err

    with db.engine.begin() as conn:
        conn.execute(text("DROP TABLE fa_meta"))  # what a store before versioning looks like
    code, _, err = _cli(capsys, "show-run", "1")
    assert code == 1 and "schema version 1" in err and "start the worker once" in err


def test_a_database_without_tables_is_no_run_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{path}")
    code, _, err = _cli(capsys, "runs")
    assert code == 1 and "has no fleet-agent tables" in err
