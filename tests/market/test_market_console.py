"""The web console in market mode, without a browser (Starlette's TestClient
on a real store): the status card has `status`'s market rows, the fleet part
`fleet`'s market line, the plot two panels more (revenue, cost and profit
$/h; slots against GPUs), and `/api/market` the point and the series as
JSON. With the market off, none of it. The browser test is
tests/market/test_market_console_browser.py."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.models import AgentConfig, AgentStatus
from fleet_agent.store import AgentConfigs, FleetSnapshots, Store
from starter.agent_client import AgentClient
from starter.console import ConsoleSettings, create_app
from starter.console.chart import HEIGHT, trend_svg
from starter.console.data import Trend, read_trend
from tests.helpers import idle_status
from tests.helpers.console_seed import AGENT, seed
from tests.helpers.market_points import SNARK, seed_market

BASE = "http://127.0.0.1:8080"


class _Agent(AgentClient):
    """An agent whose status query answers `config` without Temporal."""

    def __init__(self, config: AgentConfig) -> None:
        super().__init__(lambda: None, AGENT)  # type: ignore[arg-type,return-value]
        self.config = config

    async def status(self) -> AgentStatus:
        return idle_status(AGENT, config=self.config)


@pytest.fixture
def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _client(config: AgentConfig) -> TestClient:
    app = create_app(_Agent(config), ConsoleSettings())
    return TestClient(app, base_url=BASE, headers={"Origin": BASE})


@pytest.fixture
def seeded(store: Store, monkeypatch: pytest.MonkeyPatch, now: datetime) -> Store:
    seed(store)
    FleetSnapshots(store).save(AGENT, FleetSnapshot(target_proofs_per_hour=250), now)
    monkeypatch.setenv("FLEET_DATABASE_URL", str(store.engine.url))
    return store


def _rows(page: str) -> dict[str, str]:
    return dict(re.findall(r'<dd class="market-([a-z]+)">([^<]*)</dd>', html.unescape(page)))


def test_the_status_card_and_the_fleet_show_the_business(seeded: Store, now: datetime) -> None:
    points = seed_market(seeded, AGENT, now)
    with _client(SNARK) as client:
        card = _rows(client.get("/").text)
        fleet = html.unescape(client.get("/parts/fleet").text)
    assert list(card) == [
        "market",
        "slots",
        "price",
        "requests",
        "queue",
        "revenue",
        "cost",
        "profit",
        "loss",
        "note",
    ]
    assert card["market"].startswith(f"as of {points[-1].at:%H:%M}Z (")
    assert card["slots"] == "4 of 10 used · 6 GPUs · 512 challenges"
    assert card["profit"] == "$-3.00/h"
    since = now - timedelta(hours=1)
    assert re.fullmatch(
        f"since {since:%H:%M}Z \\(\\d+ min\\): revenue per proof under .*", card["loss"]
    )
    assert '<p class="market-line">market: GPUs 6 of 10 slots (4 used)' in fleet
    assert fleet.count('<polyline class="market-') == 6


def test_with_the_market_off_the_console_shows_none_of_it(seeded: Store, now: datetime) -> None:
    seed_market(seeded, AGENT, now)
    off = SNARK.model_copy(update={"market_mode": "off"})
    AgentConfigs(seeded).save(AGENT, off, now)
    with _client(off) as client:
        page = client.get("/").text
        fleet = client.get("/parts/fleet").text
        api = client.get("/api/market").json()
    assert "market" not in page
    assert "market" not in fleet and f'viewBox="0 0 720 {HEIGHT}"' in fleet
    assert api == {
        "agent_id": AGENT,
        "market_mode": "off",
        "latest": None,
        "line": None,
        "age_seconds": None,
        "series": [],
    }


def test_the_plot_gains_the_markets_panels(seeded: Store, now: datetime) -> None:
    points = seed_market(seeded, AGENT, now)
    trend = read_trend(AGENT, now)
    assert [p.at for p in trend.market] == [p.at for p in points]
    svg = trend_svg(trend)
    assert "capacity against target, $/h, and the market's $/h and slots" in svg
    assert f'viewBox="0 0 720 {HEIGHT + 2 * (28 + 110)}"' in svg
    lines = dict(
        re.findall(r'<polyline class="(market-[a-z-]+)" fill="none" points="([^"]+)"', svg)
    )
    assert set(lines) == {
        "market-revenue",
        "market-cost",
        "market-profit",
        "market-slots-total",
        "market-slots-used",
        "market-gpus",
    }
    # The reading without a FIL price has no revenue and no profit: one step less.
    assert len(lines["market-revenue"].split()) == len(lines["market-cost"].split()) - 2
    assert len(lines["market-profit"].split()) == len(lines["market-cost"].split()) - 2
    for text in ("revenue $/h", "cost $/h", "profit $/h", "slots", "slots used", "GPUs"):
        assert f"— {text}</text>" in svg, text
    # The loss reaches below 0 ($-3/h): the panel runs from -$5 to $10, with a 0 line.
    assert 'text-anchor="end">-$5</text>' in svg and 'text-anchor="end">$10</text>' in svg
    zero = re.search(r'<line class="zero" x1="56" y1="([\d.]+)"', svg)
    bottom = 276 + 28 + 110
    assert zero is not None and float(zero.group(1)) == pytest.approx(bottom - 110 * 5 / 15, 0.1)
    # In profit only: no 0 line, the panel starts at 0.
    gains = [p.model_copy(update={"profit_usd_per_h": 1.0}) for p in trend.market]
    plain = trend_svg(Trend(trend.start, trend.end, trend.points, trend.hours, market=gains))
    assert 'class="zero"' not in plain and "-$" not in plain
    # Without points: the plot of before.
    before = trend_svg(Trend(trend.start, trend.end, trend.points, trend.hours))
    assert "market" not in before and f'viewBox="0 0 720 {HEIGHT}"' in before


def test_the_json_carries_the_point_and_the_series(seeded: Store, now: datetime) -> None:
    points = seed_market(seeded, AGENT, now)
    with _client(SNARK) as client:
        answer = client.get("/api/market")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert body["market_mode"] == "snark" and body["line"] == points[-1].line()
    assert body["latest"]["slots_total"] == 10 and body["latest"]["ledger"]["challenges"] == 512
    assert body["age_seconds"] >= 0
    series = body["series"]
    assert [s["at"] for s in series] == [p.at.isoformat() for p in points]
    assert [s["profit_usd_per_h"] for s in series] == [3.0, 2.0, None, 0.0, -1.0, -2.0, -3.0]
    assert [s["slots_total"] for s in series] == [8, 8, 8, 10, 10, 10, 10]
    first = series[0]
    assert set(first) == {
        "at",
        "slots_total",
        "slots_used",
        "gpus",
        "challenges",
        "price_nfil",
        "market_price_nfil",
        "enabled",
        "queued",
        "rows_open",
        "revenue_nfil_per_h",
        "revenue_usd_per_h",
        "cost_usd_per_h",
        "profit_usd_per_h",
    }


def test_the_json_says_why_without_a_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_DATABASE_URL", f"sqlite:///{tmp_path / 'absent.db'}")
    with _client(SNARK) as client:
        answer = client.get("/api/market")
    assert answer.status_code == 503 and "no run log at" in answer.json()["error"]


def test_market_mode_before_any_reading(seeded: Store, now: datetime) -> None:
    AgentConfigs(seeded).save(AGENT, SNARK, now)
    with _client(SNARK) as client:
        card = _rows(client.get("/").text)
        fleet = html.unescape(client.get("/parts/fleet").text)
        api = client.get("/api/market").json()
    assert card == {"market": "no reading yet (the monitor keeps one per poll)"}
    assert '<p class="market-line">market: no reading yet' in fleet
    assert api["market_mode"] == "snark" and api["latest"] is None and api["series"] == []
