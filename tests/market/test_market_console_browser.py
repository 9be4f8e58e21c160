"""The console in market mode in a real browser: Playwright drives Debian's
chromium (as tests/console/test_console_browser.py does; without chromium it skips,
in CI it fails) against a console served by uvicorn over a seeded store and
an agent whose status query answers market mode without Temporal.

The status card shows the business row by row, the fleet part ends with the
market line, the plot draws revenue, cost and profit $/h and the slots
against the GPUs, each line in its own colour (static/console.css), the
status part's refresh keeps the rows, `/api/market` answers the page's own
fetch, and the browser reports no CSP violation.
FLEET_CONSOLE_SCREENSHOTS=DIR saves a screenshot.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from fleet_agent.fleet.snapshot import FleetSnapshot
from fleet_agent.models import AgentStatus
from fleet_agent.store import FleetSnapshots, Store
from starter.agent_client import AgentClient
from starter.console import ConsoleSettings, running_console
from tests.helpers import idle_status
from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS, need_chromium
from tests.helpers.console_seed import AGENT, seed
from tests.helpers.market_points import SNARK, seed_market

#: Each line in its own colour, apart from the capacity's and demand's.
MARKET_COLOURS = {
    "market-revenue": "rgb(23, 190, 207)",
    "market-cost": "rgb(227, 119, 194)",
    "market-profit": "rgb(188, 189, 34)",
    "market-slots-total": "rgb(127, 127, 127)",
    "market-slots-used": "rgb(57, 59, 121)",
    "market-gpus": "rgb(173, 73, 74)",
}


class _SnarkAgent(AgentClient):
    """An agent in market mode whose status query answers without Temporal."""

    def __init__(self) -> None:
        super().__init__(lambda: None, AGENT)  # type: ignore[arg-type,return-value]
        self.asked = 0

    async def status(self) -> AgentStatus:
        self.asked += 1
        return idle_status(AGENT, config=SNARK)


async def test_the_market_in_a_browser(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    need_chromium()
    from playwright.async_api import async_playwright, expect

    now = datetime.now(UTC).replace(microsecond=0)
    seed(store)
    FleetSnapshots(store).save(AGENT, FleetSnapshot(target_proofs_per_hour=250), now)
    points = seed_market(store, AGENT, now)
    monkeypatch.setenv("FLEET_DATABASE_URL", str(store.engine.url))
    agent = _SnarkAgent()
    async with (
        running_console(agent, ConsoleSettings()) as base,
        async_playwright() as pw,
    ):
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = await browser.new_page(viewport={"width": 1200, "height": 1600})
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        await page.goto(base + "/")

        status = page.locator("#status")
        await expect(status.locator("dd.market-slots")).to_have_text(
            "4 of 10 used · 6 GPUs · 512 challenges"
        )
        await expect(status.locator("dd.market-price")).to_have_text(
            "ask 0.005 FIL/proof · market 0.004 FIL/proof"
        )
        await expect(status.locator("dd.market-profit")).to_have_text("$-3.00/h")
        await expect(status.locator("dd.market-loss")).to_contain_text("revenue per proof under")
        for key in ("market", "requests", "queue", "revenue", "cost", "note"):
            await expect(status.locator(f"dd.market-{key}")).to_have_count(1)
        await expect(status.locator("dt", has_text="market slots")).to_have_count(1)

        fleet = page.locator("#fleet")
        await expect(fleet.locator("p.market-line")).to_contain_text(
            "market: GPUs 6 of 10 slots (4 used)"
        )
        plot = page.locator("#trend svg")
        for css, colour in MARKET_COLOURS.items():
            line = plot.locator(f"polyline.{css}")
            await expect(line).to_have_count(1)
            await expect(line).to_have_css("stroke", colour)
        for text in ("revenue $/h", "cost $/h", "profit $/h", "slots used", "GPUs"):
            await expect(plot).to_contain_text(f"— {text}")
        # The panels are drawn, not only written: the profit line spans its 3 h
        # of the day (an eighth of the width) and falls with the loss.
        box = await plot.locator("polyline.market-profit").bounding_box()
        assert box is not None and box["width"] > 60 and box["height"] > 10

        # The status part refreshes itself (every 3 s): the rows are there after it.
        asked = agent.asked
        async with page.expect_response(lambda r: r.url.endswith("/parts/agent")):
            pass
        assert agent.asked > asked
        await expect(status.locator("dd.market-slots")).to_have_count(1)

        # The JSON, as a script on the page fetches it.
        body = await page.evaluate("fetch('/api/market').then(r => r.json())")
        assert body["market_mode"] == "snark" and body["line"] == points[-1].line()
        assert [s["profit_usd_per_h"] for s in body["series"]][-1] == -3.0

        shots = os.environ.get("FLEET_CONSOLE_SCREENSHOTS")
        if shots:
            await page.screenshot(path=f"{shots}/console-market.png", full_page=True)
        assert not [e for e in errors if "Content Security Policy" in e], errors
        await browser.close()
