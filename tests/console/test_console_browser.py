"""The web console in a real browser: Playwright drives Debian's chromium
against a console served by uvicorn, over a real worker on the Temporal dev
server, with the fake Anthropic Messages API as the model and the vast.ai
simulator as the market.

One agent, one story: its first run asks to rent a machine and waits for an
approval, which the browser approves (after the confirmation that shows its
$/h); a message sent from the chat box is
answered on the page; the wake that answering run scheduled is cancelled from
the page; trigger now and reset ask for a confirmation; the run log and the run's
transcript load, with the link to the run's workflow in the Web UI. Wrong
approval and wake IDs on the live agent get clear errors and lose nothing. The plot draws demand
beside capacity, each line in its own colour. And, on its own, a console over
https opened by a `?token=` link from another site: the browser lands on the
page with the session cookie and keeps no URL with the token.
All of it under the console's CSP (`script-src 'self'`): the browser reports
no violation.

Chromium comes from Debian's package (`make test` installs it); without it
the test skips and says so, except in CI (the `CI` variable set), where a
missing chromium fails it: CI must run it. FLEET_CONSOLE_SCREENSHOTS=DIR saves
screenshots.
"""

from __future__ import annotations

import html
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from activities.fleet import FleetActivities
from fleet_agent.models import PendingApproval
from fleet_agent.store import Store
from simulator import SimServer
from starter.agent_client import AgentClient
from starter.console import ConsoleSettings, running_console
from starter.console.auth import COOKIE
from starter.console.tls import console_tls
from testkit.fakes.anthropic_server import FakeAnthropic, Reply, Request
from tests.helpers import eventually, json_rows, running_worker, status
from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS, need_chromium
from tests.helpers.console_auth import ALICE, PENDING, RecordingAgent
from tests.helpers.console_seed import seed_demand
from tests.helpers.console_tls import cert_files

HELLO = "console-hello: how is the fleet?"
ANSWER = "ANSWER-7d1e: the fleet is fine."
VERDICT = '\n<verdict>{"action": false, "state_changed": false}</verdict>'
ACTED = 'Rented.\n<verdict>{"action": true, "state_changed": true}</verdict>'
UI = "http://ui.test:8233"
# Each demand line in its own colour (static/console.css), apart from the
# capacity's blues and the target's red.
DEMAND_COLOURS = {
    "demand-arrivals": "rgb(255, 127, 14)",
    "demand-forecast": "rgb(148, 103, 189)",
    "demand-target": "rgb(140, 86, 75)",
}

pytestmark = pytest.mark.devserver


def _outcome(chromium: Path) -> str:
    """What `need_chromium` does about `chromium`: "ran", "skipped" or "failed"
    (caught here, so that a wrong skip cannot pass for a skipped test)."""
    try:
        need_chromium(chromium)
    except pytest.skip.Exception:
        return "skipped"
    except pytest.fail.Exception:
        return "failed"
    return "ran"


def test_without_chromium_it_skips_but_fails_in_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "chromium"
    monkeypatch.delenv("CI", raising=False)
    assert _outcome(missing) == "skipped"
    monkeypatch.setenv("CI", "true")
    assert _outcome(missing) == "failed"
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        need_chromium(missing)


def _last_tool(req: Request) -> str:
    """The tool the model called in the round these results answer."""
    asked = req.messages[-2].get("content") if len(req.messages) >= 2 else None
    names = [
        str(b.get("name"))
        for b in (asked if isinstance(asked, list) else [])
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    return names[-1] if names else ""


def _script(req: Request) -> Reply:
    """Run 1 rents the cheapest offer (which needs an approval); a run with the
    console's message schedules a wake, then answers; any other run idles."""
    results = req.tool_results()
    if results:
        tool = _last_tool(req)
        if tool == "search_offers":
            offer = json_rows(str(results[-1].get("content")))[0]["offer_id"]
            return Reply(tool_calls=[("create_instance", {"offer_id": offer, "reason": "target"})])
        return Reply(text=ANSWER + VERDICT if tool == "schedule_next_check" else ACTED)
    text = req.last_user_text()
    if HELLO in text:
        wake = {"delay_seconds": 3600, "reason": "look again in an hour"}
        return Reply(tool_calls=[("schedule_next_check", wake)])
    if text.startswith("[run #1 "):
        return Reply(tool_calls=[("search_offers", {"limit": 3})])
    return Reply(text="Nothing to do." + VERDICT)


async def _pending(agent: AgentClient) -> PendingApproval:
    async def probe() -> PendingApproval | None:
        pending = (await agent.status()).pending_approvals
        return pending[0] if pending else None

    found = await eventually(probe, timeout=30, what="run 1 to ask for an approval")
    assert found is not None
    return found


async def test_the_console_in_a_browser(
    dev_env: WorkflowEnvironment,
    store: Store,
    sim: SimServer,
    fleet: FleetActivities,
    fake_llm: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    need_chromium()
    from playwright.async_api import async_playwright, expect

    fake_llm.set_responder(_script)
    monkeypatch.setenv("FLEET_DATABASE_URL", str(store.engine.url))
    shots = os.environ.get("FLEET_CONSOLE_SCREENSHOTS")
    async with running_worker(dev_env.client, store, fleet=fleet) as h:
        handle = await h.start_agent(
            target_proofs_per_hour=50,
            monitor_enabled=False,
            approval_mode="threshold",
            approval_above_dph=0.01,
            # Short debounce windows: the first run (P1, agent_started) and
            # the message's (P0) start at once.
            p0_debounce_seconds=0.2,
            p1_debounce_seconds=0.2,
        )
        agent = AgentClient(dev_env.client, handle.id, task_queue=h.task_queue)
        pending = await _pending(agent)
        async with (
            running_console(agent, ConsoleSettings(ui_url=UI)) as base,
            async_playwright() as pw,
            httpx.AsyncClient(base_url=base, headers={"Origin": base}) as http,
        ):
            # Wrong IDs on the live agent: the workflow's own refusal, shown plainly.
            wrong = await http.post("/approvals/a9-9/decide", data={"decision": "approve"})
            assert wrong.status_code == 400
            refusal = f"no pending approval 'a9-9' (pending: {pending.id})"
            assert refusal in html.unescape(wrong.text)
            no_wake = await http.post("/wakes/w-nope/cancel")
            assert no_wake.status_code == 400
            assert "has no pending wake 'w-nope' (pending: none)" in html.unescape(no_wake.text)
            assert [a.id for a in (await agent.status()).pending_approvals] == [pending.id]
            browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = await browser.new_page(viewport={"width": 1200, "height": 1400})
            confirms: list[str] = []

            async def accept(dialog: Any) -> None:
                confirms.append(dialog.message)
                await dialog.accept()

            page.on("dialog", accept)
            # What the browser refused to run (a CSP violation is a console error).
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

            # Approve the waiting create: the run goes on and rents once.
            await page.goto(base + "/")
            row = page.locator(f"#approval-{pending.id}")
            await expect(row).to_contain_text("create_instance")
            if shots:
                await page.screenshot(path=f"{shots}/console-approval.png", full_page=True)
            await row.get_by_role("button", name="approve").click()
            # First a confirmation with the approval's $/h; nothing is decided yet.
            confirm = page.locator(f"#notice #confirm-{pending.id}")
            await expect(confirm).to_contain_text(f"{pending.dph:+.3f}")
            assert [a.id for a in (await agent.status()).pending_approvals] == [pending.id]
            await confirm.get_by_role("button", name=f"yes, approve {pending.id}").click()
            await expect(page.locator("#agent-live")).to_contain_text(f"approved {pending.id}")
            await expect(confirm).to_have_count(0)

            async def rented() -> bool:
                st = await status(handle)
                return st.last_run is not None and st.last_run.run == 1

            await eventually(rented, timeout=30, what="run 1 to end after the approval")
            assert sim.market.state()["counters"]["creates"] == 1

            # Say, then see the answer on the page.
            await page.fill("#chat-text", HELLO)
            await page.get_by_role("button", name="send").click()
            await expect(page.locator("#chat-log")).to_contain_text(ANSWER, timeout=20_000)
            await expect(page.locator("#chat-text")).to_have_value("")  # static/console.js ran

            # The answering run scheduled a wake: cancel it (after a confirmation).
            wake = page.locator("#wakes tr[id^=wake-]")
            await expect(wake).to_have_count(1, timeout=10_000)
            await wake.get_by_role("button", name="cancel").click()
            await expect(wake).to_have_count(0)
            assert (await agent.status()).wakes == []
            assert confirms[-1].startswith("Cancel wake ")

            # Trigger now asks first, then says it was requested.
            await page.locator("#trigger-now").click()
            await expect(page.locator("#notice")).to_contain_text("run requested")
            assert confirms[-1] == "Ask the agent for a run now?"
            # Reset asks too; the agent starts session 2 after the current run.
            await page.fill("#controls input[name=reason]", "from the console")
            await page.locator("#reset-session").click()
            await expect(page.locator("#notice")).to_contain_text("reset requested")
            assert confirms[-1].startswith("Start a new conversation session")

            async def new_session() -> bool:
                return (await agent.status()).session == 2

            await eventually(new_session, timeout=20, what="the reset to start session 2")
            # The fleet as the newest run saw it: the machine run 1 rented;
            # and demand beside capacity, from readings the monitor of an
            # agent in demand mode would have kept.
            seed_demand(store, handle.id, datetime.now(UTC))
            await page.reload()
            await expect(page.locator("#fleet table")).to_contain_text("RTX")
            plot = page.locator("#trend svg")
            await expect(plot.locator("polyline")).to_have_count(6)
            for css, colour in DEMAND_COLOURS.items():
                line = plot.locator(f"polyline.{css}")
                await expect(line).to_have_count(1)
                await expect(line).to_have_css("stroke", colour)
            for text in ("arrivals/h", "forecast", "demand target"):
                await expect(plot).to_contain_text(f"— {text}")
            if shots:
                await page.screenshot(path=f"{shots}/console.png", full_page=True)

            # The run log, filtered to runs with a message, and that run's transcript.
            await page.goto(base + "/runs?filter=human")
            runs = page.locator("#runs tr.run")
            await expect(runs).to_have_count(1)
            if shots:
                await page.goto(base + "/runs")
                await page.screenshot(path=f"{shots}/console-runs.png", full_page=True)
                await page.goto(base + "/runs?filter=human")
            await runs.locator("a").first.click()
            await expect(page.locator("main")).to_contain_text(HELLO)
            await expect(page.locator("main")).to_contain_text("schedule_next_check")
            assert not [e for e in errors if "Content Security Policy" in e], errors
            link = await page.locator("#ui-link").get_attribute("href")
            run = page.url.rsplit("/", 1)[1]
            assert link is not None
            assert link.startswith(f"{UI}/namespaces/default/workflows/{handle.id}%2Frun-{run}/")
            await browser.close()


async def test_a_token_link_leaves_no_token_in_the_browser(tmp_path: Path) -> None:
    """The phone's way in, in a real browser: a `?token=` link to a console
    served over https, opened from another site's page (a chat's web app, a
    webmail), lands on the page it names with the session cookie, and no URL
    the browser shows or offers again holds the token: the address bar, the
    back and forward list, the history page (chrome://history)."""
    need_chromium()
    from playwright.async_api import async_playwright, expect

    certs = cert_files(tmp_path)
    tls = console_tls(str(certs.cert), str(certs.key))
    settings = ConsoleSettings(ui_url=UI, tokens=(("alice", ALICE),))
    chat = "http://chat.example/"
    async with (
        running_console(RecordingAgent(), settings, tls=tls) as base,
        async_playwright() as pw,
    ):
        page_url = f"{base}/approvals/{PENDING.id}"
        link = f"{page_url}?token={ALICE}"
        # A persistent profile: the browser keeps a history, as a phone's does.
        context = await pw.chromium.launch_persistent_context(
            tmp_path / "profile",
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            ignore_https_errors=True,  # the test's own CA
        )
        page = await context.new_page()
        # Another site's page with the link (served by the browser itself).
        await page.route(
            chat,
            lambda route: route.fulfill(
                content_type="text/html", body=f'<a id="open" href="{link}">the console</a>'
            ),
        )
        await page.goto(chat)
        async with page.expect_navigation():
            await page.click("#open")
        assert page.url == page_url
        await expect(page.locator("main")).to_contain_text(PENDING.id)
        (cookie,) = [c for c in await context.cookies(base) if c["name"] == COOKIE]
        assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Lax"
        # Back is the other site's page, forward the console's page without the token.
        await page.go_back()
        assert page.url == chat
        await page.go_forward()
        assert page.url == page_url
        # A new tab opens the console by its cookie.
        again = await context.new_page()
        answer = await again.goto(f"{base}/runs")
        assert answer is not None and answer.status != 401
        # The history page lists the console's page, without the token.
        history = await context.new_page()
        await history.goto("chrome://history")
        listed = history.locator("history-item a#link")
        await expect(listed.first).to_be_visible()
        hrefs = await listed.evaluate_all("links => links.map(a => a.href)")
        assert page_url in hrefs, hrefs
        assert not [h for h in hrefs if "token=" in h], hrefs
        await context.close()
