"""`fleet-agent status` and `fleet-agent fleet` in market mode: the store's
latest market point as a `market` block in status (slots, prices, requests,
queue, revenue, cost, profit, the loss, the note, the age) and as one line
under the fleet's table ("GPUs 6 of 10 slots"); with the market off both
read byte for byte as before. The store's reads on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.models import AgentConfig, AgentStatus
from fleet_agent.store import AgentConfigs, FleetSnapshots, MarketHistory, Store
from starter.cli import main
from starter.cli.fleet_render import fleet_text
from starter.views.fleet import build_fleet_view
from starter.views.market import latest_market, market_of, market_series, stored_market
from starter.views.render import status_text
from tests.helpers import idle_status
from tests.helpers.market_points import SNARK, market_point, seed_market
from tests.helpers.store_backends import store_on_both_backends

__all__ = ["store_on_both_backends"]  # the `store` fixture, on both backends

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
POINT = market_point(NOW - timedelta(minutes=2))


def _status(config: AgentConfig) -> AgentStatus:
    return idle_status("a1", config=config)


def _block(text: str) -> list[str]:
    """The status's market rows: `market:` and the rows indented under it."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  market:"))
    block = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("    "):
            break
        block.append(line)
    return block


def test_market_mode_shows_the_business_as_a_block() -> None:
    point = POINT.model_copy(
        update={"loss_since": NOW - timedelta(minutes=75), "note": "lower\nthe\tprice"}
    )
    block = _block(status_text(_status(SNARK), NOW, market=point))
    assert block == [
        "  market:         as of 11:58Z (2 min ago)",
        "    slots:        4 of 10 used · 6 GPUs · 512 challenges",
        "    price:        ask 0.005 FIL/proof · market 0.004 FIL/proof",
        "    requests:     on · 2 asks open",
        "    queue:        3 waiting / 7 open rows (1 challenge proofs)",
        "    revenue:      1.2000 FIL/h · $6.00/h (FIL $5, config) · 240 paid proofs/h",
        "    cost:         $4.00/h (rental $3.50 · LLM $0.50)",
        "    profit:       $+2.00/h",
        "    loss:         since 10:45Z (75 min): revenue per proof under cost per proof",
        "    note:         lower the price",
    ]


def test_unknown_figures_stale_points_and_too_many_gpus_are_said() -> None:
    point = POINT.model_copy(
        update={
            "at": NOW - timedelta(minutes=9),
            "market_price_nfil": None,
            "revenue_usd_per_h": None,
            "fil_usd": None,
            "profit_usd_per_h": None,
            "gpus": 11,
            "enabled": False,
            "note": "",
        }
    )
    text = "\n".join(_block(status_text(_status(SNARK), NOW, market=point)))
    assert "as of 11:51Z (9 min ago) — STALE: the monitor has not read the node since" in text
    assert "market n/a" in text and "requests:     off" in text
    assert "revenue:      1.2000 FIL/h · 240 paid proofs/h" in text
    assert "profit:       n/a (no FIL price" in text
    assert "— OVER: 11 GPUs rented for 10 slots" in text
    assert "loss:" not in text and "note:" not in text


def test_market_mode_before_any_reading_says_so() -> None:
    assert _block(status_text(_status(SNARK), NOW)) == [
        "  market:         no reading yet (the monitor keeps one per poll)"
    ]


def test_with_the_market_off_status_and_fleet_read_as_before() -> None:
    off = SNARK.model_copy(update={"market_mode": "off"})
    text = status_text(_status(off), NOW, market=POINT)
    assert text == status_text(_status(off), NOW)
    assert "market" not in text
    view = build_fleet_view("a1", None, None, NOW)
    assert fleet_text(view, NOW, market=POINT) == fleet_text(view, NOW)


def test_the_fleet_has_a_market_line_under_its_table() -> None:
    view = build_fleet_view("a1", None, None, NOW)
    lines = fleet_text(view, NOW, market_mode=True, market=POINT).splitlines()
    assert lines[:-1] == fleet_text(view, NOW).splitlines()
    assert lines[-1] == (
        "market: GPUs 6 of 10 slots (4 used) · queue 3 waiting / 7 open · "
        "ask 0.005 FIL/proof (market 0.004 FIL/proof) · requests on · profit $+2.00/h · "
        "as of 11:58Z (2 min ago)"
    )
    over = fleet_text(view, NOW, market_mode=True, market=POINT.model_copy(update={"gpus": 12}))
    assert "GPUs 12 of 10 slots (OVER the slots)" in over
    none_yet = fleet_text(view, NOW, market_mode=True).splitlines()[-1]
    assert none_yet == "market: no reading yet (the monitor keeps one per poll)"


def test_the_store_gives_the_latest_point_in_market_mode_only(store: Store) -> None:
    assert latest_market(store, "a1") is None
    assert market_of(store, "a1") == (False, None), "no config kept: not in market mode"
    points = seed_market(store, "a1", NOW)
    MarketHistory(store).record("other", POINT.model_copy(update={"at": NOW}))
    assert latest_market(store, "a1") == points[-1]
    assert market_of(store, "a1") == (True, points[-1])
    series = market_series(store, "a1", NOW - timedelta(hours=2), NOW)
    assert [p.at for p in series] == [p.at for p in points[2:]]
    assert (
        market_series(store, "a1", NOW - timedelta(hours=2), NOW - timedelta(hours=1))[-1]
        == (points[4])
    )
    # The agent turned the market off: the store-only readers show nothing.
    AgentConfigs(store).save("a1", SNARK.model_copy(update={"market_mode": "off"}), NOW)
    assert market_of(store, "a1") == (False, None)
    assert market_series(store, "a1", NOW - timedelta(hours=2), NOW) == []


def test_a_store_without_the_market_table_shows_no_reading(store: Store) -> None:
    seed_market(store, "a1", NOW)
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE fa_market_points")
    assert latest_market(store, "a1") is None
    assert market_of(store, "a1") == (True, None)
    assert market_series(store, "a1", NOW - timedelta(hours=2), NOW) == []


def test_status_reads_the_stores_latest_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store = Store(url)
    store.create_all()
    points = seed_market(store, "a1", datetime.now(UTC))
    store.dispose()
    monkeypatch.setenv("FLEET_DATABASE_URL", url)
    assert stored_market(_status(SNARK)) == points[-1]
    assert stored_market(_status(AgentConfig())) is None, "the market off reads nothing"
    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{tmp_path / 'none.db'}")
    assert stored_market(_status(SNARK)) is None, "no store here: no reading"


def test_the_cli_shows_the_market_line_in_market_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    store = Store(url)
    store.create_all()
    now = datetime.now(UTC)
    FleetSnapshots(store).save("a1", FleetSnapshot(target_proofs_per_hour=100), now)
    AgentConfigs(store).save("a1", AgentConfig(), now)
    monkeypatch.setenv("FLEET_DATABASE_URL", url)
    assert main(["fleet", "--agent", "a1"]) == 0
    plain = capsys.readouterr().out
    assert "market" not in plain
    seed_market(store, "a1", now)
    store.dispose()
    assert main(["fleet", "--agent", "a1"]) == 0
    shown = capsys.readouterr().out.splitlines()
    # The head says the snapshot's age, which moves: the rest reads as before.
    assert shown[1:-1] == plain.splitlines()[1:]
    assert shown[-1].startswith("market: GPUs 6 of 10 slots (4 used) · queue 3 waiting / 7 open")
