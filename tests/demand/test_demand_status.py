"""`fleet-agent status` in demand mode: a line with the mode, the latest
reading (the store's, else the one of the last change) and the last
change's reason; in fixed mode just "target mode: fixed"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet_agent.demand.point import DemandPoint
from fleet_agent.models import AgentConfig, AgentStatus, DemandTargetChange
from fleet_agent.store import DemandHistory, Store
from starter.views.demand import stored_demand
from starter.views.render import status_text
from tests.helpers import idle_status

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
DEMAND = AgentConfig(target_mode="demand", min_target=100, max_target=900)
DECIDED = DemandPoint(
    at=NOW - timedelta(minutes=20), recent_per_h=250, target_per_h=400, reason="raise"
)
CHANGE = DemandTargetChange(
    target_per_h=400,
    previous_per_h=300,
    action="raise",
    reason="raise to 400/h: need 350/h",
    point=DECIDED,
)


def _status(config: AgentConfig, change: DemandTargetChange | None = None) -> AgentStatus:
    return idle_status(config=config, demand=change)


def _demand_row(text: str) -> str:
    rows = [line for line in text.splitlines() if line.strip().startswith("target mode:")]
    assert len(rows) == 1, text
    return rows[0]


def test_fixed_mode_is_one_short_line() -> None:
    row = _demand_row(status_text(_status(AgentConfig()), NOW))
    assert row.split(":", 1)[1].strip() == "fixed"


def test_demand_mode_shows_the_stores_latest_reading_and_the_last_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store = Store(url)
    store.create_all()
    latest = DECIDED.model_copy(
        update={"at": NOW - timedelta(minutes=2), "recent_per_h": 333.0, "queued": 9}
    )
    DemandHistory(store).record("a1", DECIDED)
    DemandHistory(store).record("a1", latest)
    DemandHistory(store).record("other", DECIDED.model_copy(update={"at": NOW}))
    store.dispose()
    monkeypatch.setenv("FLEET_DATABASE_URL", url)

    st = _status(DEMAND, CHANGE)
    point = stored_demand(st)
    assert point == latest
    row = _demand_row(status_text(st, NOW, demand=point))
    assert "demand within [100, 900] proofs/h" in row
    assert f"as of 11:58Z (2 min ago): {latest.line()}" in row
    assert "last change at 11:40Z 300 → 400: raise to 400/h: need 350/h" in row
    assert stored_demand(_status(AgentConfig())) is None, "fixed mode reads nothing"


def test_without_the_store_the_last_changes_reading_stands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{tmp_path / 'none.db'}")
    st = _status(DEMAND, CHANGE)
    assert stored_demand(st) is None
    row = _demand_row(status_text(st, NOW))
    assert f"as of 11:40Z (20 min ago): {DECIDED.line()}" in row


def test_demand_mode_before_any_reading_says_so() -> None:
    row = _demand_row(status_text(_status(DEMAND), NOW))
    assert "no reading yet" in row and "last change" not in row
