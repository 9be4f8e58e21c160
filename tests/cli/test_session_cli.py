"""`fleet-agent session` and the summary in `show-run`, read from the store."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fleet_agent.store import Store, SummaryRecord
from starter import cli

AGENT = "fleet-agent"
T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    monkeypatch.setenv("FLEET_DATABASE_URL", url)
    store = Store(url)
    store.create_all()
    store.sessions.ensure_session(AGENT, 1, "agent started", T0)
    for run in range(1, 8):
        store.run_writes.begin_run(AGENT, run, 1, [], "Trigger: heartbeat.", T0, "")
    for first, upto, by, source in ((1, 3, 5, "llm"), (4, 5, 7, "digest")):
        store.summaries.add_summary(
            SummaryRecord(
                agent_id=AGENT,
                session=1,
                made_by_run=by,
                first_run=1,
                from_run=first,
                upto_run=upto,
                body=f"- run #{upto}: ops said hello",
                source=source,
                fallback_reason="" if source == "llm" else "the summariser failed: 500",
                tokens=9,
                created_at=T0,
            )
        )
    return store


def test_session_prints_every_summary_of_the_newest_session(
    db: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run(["session"]) == 0
    out = capsys.readouterr().out
    assert "session 1: 2 summary version(s)" in out
    assert "summary of runs #1–#3 (folded #1–#3 before run #5" in out
    assert "by the digest — the summariser failed: 500" in out
    assert cli.run(["session", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["upto_run"] for s in data["summaries"]] == [3, 5]
    assert cli.run(["session", "2"]) == 0
    assert "no summary yet" in capsys.readouterr().out


def test_show_run_prints_the_summary_that_folded_the_run(
    db: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run(["show-run", "4"]) == 0
    assert "In the session's summary of runs #1–#5 (folded #4–#5" in capsys.readouterr().out
    assert cli.run(["show-run", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"] is None
    assert cli.run(["show-run", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["upto_run"] == 3
